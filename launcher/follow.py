"""One stream of events for a running job: the backend's events plus one replica's logs.

`backend.events()` and `backend.logs(follow=True)` both block, so each runs in a daemon
thread feeding one queue; the caller iterates `merged(...)`. Progress events are parsed
from the followed replica's log lines. The stream ends once a terminal JobCondition has
been seen and the log stream has ended (or `drain_seconds` passed after it), so the
last log lines still show. The phase that says the followed replica ended waits for its
last lines (`_Hold`); the terminal condition waits for the side replicas' last lines
(their streams end with the job), at most `drain_seconds`. A failure of the event stream raises BackendError; a failure of
the log stream becomes one log line saying so (the job is still watched).
"""
from __future__ import annotations

import queue
import threading
import time
from collections import Counter
from typing import Callable, Iterable, Iterator, NamedTuple

from .backends.base import Backend, BackendError
from .events import TERMINAL, Event, JobCondition, LogEnded, LogLine, ReplicaPhase, parse_progress, parse_result

_END = object()
POLL_SECONDS = 0.25


class _Failure(NamedTuple):
    stream: str
    error: Exception


def _pump(name: str, source: Callable[[], Iterable[Event]], out: queue.Queue,
          keep: Callable[[str], bool] | None = None) -> None:
    """`keep`: a side replica's stream: only its lines `keep` accepts, nothing parsed from
    them, no LogEnded (the view waits for the followed replica's ends alone)."""
    try:
        for item in source():
            if keep is not None:
                if isinstance(item, LogLine) and keep(item.line):
                    out.put(item)
                continue
            out.put(item)
            if isinstance(item, LogLine):
                for parsed in (parse_progress(item.line), parse_result(item.line)):
                    if parsed is not None:
                        out.put(parsed)
    except Exception as exc:  # reported to the consumer, which decides
        out.put(_Failure(name, exc))
    finally:
        out.put((_END, name))


def _start(name: str, source: Callable[[], Iterable[Event]], out: queue.Queue,
           keep: Callable[[str], bool] | None = None) -> None:
    threading.Thread(target=_pump, args=(name, source, out, keep), name=f"follow-{name}", daemon=True).start()


class _Hold:
    """The event stream's items held back while the followed replica's last lines are still
    on their way: the phase that says one of its containers ended (Succeeded, Failed, or a
    restart: its restarts went up) comes by the event stream, its last lines by the log
    stream, and either may come first. From such a phase on, events wait until the log
    stream says that container's log ended (LogEnded), the log stream ends, or `seconds`
    pass; lines pass meanwhile. So the view prints `[chief-0] Succeeded` after the chief's
    last line, and a crash's traceback before the restart it caused."""

    def __init__(self, replica: str | None, seconds: float):
        self.replica, self.seconds = replica, seconds
        # ends the log stream marked that no phase has claimed yet, and ends given up on
        # (their marks, when late, match nothing): counted, as a pod made anew (ExitCode)
        # numbers its containers from 0 again
        self.marks: Counter[tuple[str, int]] = Counter()
        self.given_up: Counter[tuple[str, int]] = Counter()
        self.restarts = 0  # of the replica's last phase
        self.ended = False  # whether a phase said the replica's current instance ended
        self.key: tuple[str, int] | None = None  # the instance whose end is awaited
        self.until = 0.0
        self.items: list[Event] = []

    def waits_for(self, item: Event) -> tuple[str, int] | None:
        if not (isinstance(item, ReplicaPhase) and item.replica == self.replica):
            return None
        key = None
        if item.phase in TERMINAL:
            if not self.ended:  # not a second phase of one end (a message or exit code filled in)
                key = (item.replica, item.restarts)
            self.ended = True
        elif item.restarts > self.restarts:  # the container before this one ended
            key, self.ended = (item.replica, item.restarts - 1), False
        else:  # after an end, a pod made anew
            self.ended = False
        self.restarts = item.restarts  # a pod made anew (ExitCode) starts over at 0
        if key is not None and self.marks[key]:
            self.marks[key] -= 1  # its log had ended already
            return None
        return key

    def take(self, item: Event) -> list[Event]:
        """What of the event stream can show now, `item` included."""
        if self.key is None and (key := self.waits_for(item)) is not None:
            self.key, self.until = key, time.monotonic() + self.seconds
        if self.key is None:
            return [item]
        self.items.append(item)
        return []

    def log_ended(self, key: tuple[str, int]) -> list[Event]:
        if key == self.key:
            self.key = None
            return self.release()
        if self.given_up[key]:
            self.given_up[key] -= 1
        else:
            self.marks[key] += 1
        return []

    def release(self) -> list[Event]:
        """Everything held (the awaited end given up on when it did not come)."""
        if self.key is not None:
            self.given_up[self.key] += 1
        items, self.items, self.key = self.items, [], None
        shown = []
        for item in items:  # a later phase may wait again
            shown += self.take(item)
        return shown

    def due(self) -> bool:
        return self.key is not None and time.monotonic() >= self.until


def merged(backend: Backend, name: str, namespace: str, replica: str | None,
           drain_seconds: float = 10.0, side: dict[str, Callable[[str], bool]] | None = None) -> Iterator[Event]:
    """Events and `replica`'s log lines (None: no logs) until the job is terminal; an event
    saying `replica` ended comes after its last line (`_Hold`, at most `drain_seconds` late).
    `side`: {other replica: which of its lines to show} (a side-car evaluator's Eval lines)."""
    items: queue.Queue = queue.Queue()
    open_streams = {"events"}
    hold = _Hold(replica, drain_seconds)
    _start("events", lambda: backend.events(name, namespace), items)
    if replica is not None:
        open_streams.add("logs")
        _start("logs", lambda: backend.logs(name, namespace, replica, follow=True, ends=True), items)
    for other, keep in (side or {}).items():
        open_streams.add(other)
        _start(other, lambda other=other: backend.logs(name, namespace, other, follow=True), items, keep)
    drain_until = None
    ending: list[Event] = []  # the terminal condition and the events after it, until the side logs ended
    ending_due = 0.0
    while open_streams or hold.items or ending:
        if drain_until is not None and time.monotonic() >= drain_until:
            return
        if ending and (not open_streams & set(side or ()) or time.monotonic() >= ending_due):
            shown, ending = ending, []
            for event in shown:
                yield event
            drain_until = time.monotonic() + drain_seconds
            continue
        if hold.items and ("logs" not in open_streams or hold.due()):
            shown = hold.release()
        else:
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
                item = LogLine((replica or "") if item.stream == "logs" else item.stream,
                               f"(launcher: log stream failed: {item.error})")
            if isinstance(item, LogEnded):
                shown = hold.log_ended((item.replica, item.restarts))
            elif isinstance(item, (JobCondition, ReplicaPhase)):
                shown = hold.take(item)
            else:
                shown = [item]
        for event in shown:
            if ending and isinstance(event, (JobCondition, ReplicaPhase)):
                ending.append(event)  # after the terminal condition, as they came
            elif isinstance(event, JobCondition) and event.terminal and drain_until is None and side:
                ending, ending_due = [event], time.monotonic() + drain_seconds  # the side logs' last lines first
            else:
                yield event
                if isinstance(event, JobCondition) and event.terminal and drain_until is None:
                    drain_until = time.monotonic() + drain_seconds
