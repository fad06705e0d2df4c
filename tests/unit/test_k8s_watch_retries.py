"""The watches' bounds (launcher/backends/k8s/watch.py): how long a server that does not
answer is waited for, and that the count of failures is of failures in a row. ListWatch
runs here against ScriptedApi, a test double of one list/watch call (streams that end or
break on cue, without a server); the real streams are in tests/integration."""
from __future__ import annotations

import json
import queue
import threading

import urllib3

from launcher.backends.k8s import watch
from launcher.backends.k8s.watch import MAX_FAILURES, ListWatch, Synced, WatchFailed, retry_delay


def test_a_server_that_does_not_answer_is_waited_for_about_a_minute():
    """A restarting API server (tens of seconds) is waited for; the first tries come soon."""
    waits = [retry_delay(n) for n in range(1, MAX_FAILURES + 1)]
    assert waits[0] <= 0.5 and max(waits) <= 5.0
    assert 45.0 <= sum(waits) <= 90.0


class _Answer:
    """A streamed answer of the test double: `data` for a list; a watch stream that the
    server ends at once (its timeout)."""

    def __init__(self, data: bytes = b""):
        self.data = data

    def stream(self, amt=None, decode_content=True):
        return iter(())

    def release_conn(self) -> None:
        pass

    close = shutdown = release_conn


class ScriptedApi:
    """FAKE list/watch call: the list answers; watches alternate between a transport
    failure and an answered stream the server ends, `rounds` times, then the consumer stops."""

    def __init__(self, rounds: int, stop: threading.Event):
        self.rounds, self.stop, self.watches = rounds, stop, 0

    def __call__(self, **params):
        if not params.get("watch"):
            return _Answer(json.dumps({"metadata": {"resourceVersion": "7"}, "items": []}).encode())
        self.watches += 1
        if self.watches >= 2 * self.rounds:
            self.stop.set()
            return _Answer()
        if self.watches % 2:
            raise urllib3.exceptions.ProtocolError("Connection reset by peer")
        return _Answer()


def test_failures_between_which_the_server_answered_are_not_added_up(monkeypatch):
    """A stream cut now and then over a long job (a load balancer's idle timeout, an API
    server upgrade) is each time one failure: after MAX_FAILURES of them, spread over the
    job, the watch goes on instead of saying it lost the server."""
    monkeypatch.setattr(watch, "retry_delay", lambda failures: 0.0)
    stop, sink = threading.Event(), queue.Queue()
    api = ScriptedApi(rounds=MAX_FAILURES + 5, stop=stop)
    lister = ListWatch("tfjob", api, sink, stop, "https://test-double")
    lister.start()
    lister.join(timeout=30)
    assert not lister.is_alive() and api.watches == 2 * api.rounds
    items = []
    while not sink.empty():
        items.append(sink.get())
    assert not [item for item in items if isinstance(item, WatchFailed)], items
    assert [type(item) for item in items] == [Synced]



class _Garbled(ScriptedApi):
    """FAKE call whose list answer is not JSON (a proxy's error page with status 200)."""

    def __call__(self, **params):
        return _Answer(b"<html><body>502 Bad Gateway</body></html>")


def test_an_answer_that_is_no_list_ends_the_watch_with_an_error_not_a_silent_wait():
    """The consumer waits on the queue without a bound: a watch thread that died without a
    word would leave `status -w` or `logs -f` hanging for ever."""
    stop, sink = threading.Event(), queue.Queue()
    lister = ListWatch("tfjob", _Garbled(rounds=1, stop=stop), sink, stop, "https://test-double")
    lister.start()
    lister.join(timeout=30)
    failed = sink.get(timeout=30)
    assert isinstance(failed, WatchFailed) and str(failed.error).startswith("watching tfjob: "), failed
