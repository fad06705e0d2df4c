"""One stream of events for a running job: the backend's events plus one replica's logs.

`backend.events()` and `backend.logs(follow=True)` both block, so each runs in a daemon
thread feeding one queue; the caller iterates `merged(...)`. Progress events are parsed
from the followed replica's log lines. The stream ends once a terminal JobCondition has
been seen and the log stream has ended (or `drain_seconds` passed after it), so the
last log lines still show. A failure of the event stream raises BackendError; a failure
of the log stream becomes one log line saying so (the job is still watched).
"""
from __future__ import annotations

import queue
import threading
import time
from typing import Callable, Iterable, Iterator, NamedTuple

from .backends.base import Backend, BackendError
from .events import Event, JobCondition, LogLine, parse_progress, parse_result

_END = object()
POLL_SECONDS = 0.25


class _Failure(NamedTuple):
    stream: str
    error: Exception


def _pump(name: str, source: Callable[[], Iterable[Event]], out: queue.Queue) -> None:
    try:
        for item in source():
            out.put(item)
            if isinstance(item, LogLine):
                for parsed in (parse_progress(item.line), parse_result(item.line)):
                    if parsed is not None:
                        out.put(parsed)
    except Exception as exc:  # reported to the consumer, which decides
        out.put(_Failure(name, exc))
    finally:
        out.put((_END, name))


def _start(name: str, source: Callable[[], Iterable[Event]], out: queue.Queue) -> None:
    threading.Thread(target=_pump, args=(name, source, out), name=f"follow-{name}", daemon=True).start()


def merged(backend: Backend, name: str, namespace: str, replica: str | None,
           drain_seconds: float = 10.0) -> Iterator[Event]:
    """Events and `replica`'s log lines (None: no logs) until the job is terminal."""
    items: queue.Queue = queue.Queue()
    open_streams = {"events"}
    _start("events", lambda: backend.events(name, namespace), items)
    if replica is not None:
        open_streams.add("logs")
        _start("logs", lambda: backend.logs(name, namespace, replica, follow=True), items)
    drain_until = None
    while open_streams:
        if drain_until is not None and time.monotonic() >= drain_until:
            return
        try:
            item = items.get(timeout=POLL_SECONDS)
        except queue.Empty:
            continue
        if isinstance(item, tuple) and item and item[0] is _END:
            open_streams.discard(item[1])
            continue
        if isinstance(item, _Failure):
            if item.stream == "events":
                raise BackendError(f"lost the event stream of {name}: {item.error}") from item.error
            item = LogLine(replica or "", f"(launcher: log stream failed: {item.error})")
        yield item
        if isinstance(item, JobCondition) and item.terminal and drain_until is None:
            drain_until = time.monotonic() + drain_seconds
