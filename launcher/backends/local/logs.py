"""Reading and following the per-replica log files of a local job."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Callable, Iterator

from ...events import LogEnded, LogLine

POLL_SECONDS = 0.2


class Tail:
    """Incremental reader of one log file that may not exist yet; yields whole lines."""

    def __init__(self, replica: str, path: Path):
        self.replica = replica
        self.path = path
        self.offset = 0
        self.partial = b""

    def read(self, upto: int | None = None) -> list[LogLine]:
        """The whole lines written since the last read (with `upto`, of the file's first
        `upto` bytes only)."""
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read() if upto is None else f.read(max(upto - self.offset, 0))
        except FileNotFoundError:
            return []
        self.offset += len(data)
        *lines, self.partial = (self.partial + data).split(b"\n")
        return [self._line(raw) for raw in lines]

    def flush(self) -> list[LogLine]:
        """The last line when the file does not end with a newline."""
        rest, self.partial = self.partial, b""
        return [self._line(rest)] if rest else []

    def _line(self, raw: bytes) -> LogLine:
        return LogLine(self.replica, raw.decode("utf-8", "replace").rstrip("\r"))


def last(lines: list[LogLine], count: int | None) -> list[LogLine]:
    """The last `count` lines (all when None; none for 0)."""
    return lines if count is None else lines[max(len(lines) - count, 0):]


def read_logs(tails: list[Tail], tail_lines: int | None = None,
              ends: dict[str, list[int | None]] | None = None) -> Iterator[LogLine]:
    """Everything written so far (or its last `tail_lines` lines), one replica after the
    other; a process's unterminated last line stays its own at its end in `ends` (as
    follow_logs)."""
    for tail in tails:
        lines = []
        for mark in (ends or {}).get(tail.replica, []):
            lines += tail.read(mark) + tail.flush()
        yield from last(lines + tail.read() + tail.flush(), tail_lines)


def previous_span(row: dict, ends: list[int | None]) -> tuple[int, int] | str:
    """Where in a replica's log (one file across its restarts) the process before the
    current one wrote, as (start, end) bytes; else why there is none. As the kubelet's
    lastState: while a process runs or a restart waits, the last process that ended; once
    the replica is Succeeded or Failed, the process before its last one. `row`: the
    replica's status; `ends`: the file's size as each of its processes ended."""
    before = 2 if row["phase"] in ("Succeeded", "Failed") else 1  # ends up to the previous process's
    if len(ends) < before:
        return f"replica {row['id']} has no process before its current one (restarts {row.get('restarts', 0)})"
    bounds = [0] + ends[:len(ends) - before + 1]
    start, end = bounds[-2], bounds[-1]
    if start is None or end is None:
        return (f"replica {row['id']} ran under an earlier launcher, which did not record where each process's "
                "lines end; use logs without --previous (every process's lines, appended)")
    return start, end


def read_span(tail: Tail, span: tuple[int, int], tail_lines: int | None = None) -> list[LogLine]:
    """The lines of `span` (start, end bytes) of the tail's file, or its last `tail_lines`."""
    tail.offset = span[0]
    return last(tail.read(span[1]) + tail.flush(), tail_lines)


def follow_logs(tails: list[Tail], state: Callable[[], tuple[bool, dict[str, list[int | None]]]],
                tail_lines: int | None = None, ends: bool = False) -> Iterator[LogLine | LogEnded]:
    """New lines of every replica as they come (files appear when a replica starts and
    grow across restarts) until the job is finished and every file is drained; with
    `tail_lines`, of what each file holds already only its last lines come first (kubectl's
    -f --tail). `state()`: whether the job is finished, and for each replica the size its
    log file had when each of its processes ended (None: not recorded); with `ends`, a
    LogEnded follows the last line of each process, before the next one's first line (one
    file spans a replica's restarts)."""
    if tail_lines is not None:
        for tail in tails:
            yield from last(tail.read(), tail_lines)
    told = {tail.replica: 0 for tail in tails}
    while True:
        done, ended = state()  # checked before reading: what an ended process wrote is in its file
        idle = True
        for tail in tails:
            marks = ended.get(tail.replica, []) if ends else []
            for number in range(told[tail.replica], len(marks)):
                mark = marks[number]
                lines = tail.read(mark)  # that process's rest, not the next one's lines
                idle = idle and not lines
                yield from lines
                if mark is None or tail.offset <= mark:  # else read past it already (--tail)
                    yield from tail.flush()  # its last line, when unterminated
                yield LogEnded(tail.replica, number)
            told[tail.replica] = max(told[tail.replica], len(marks))
            lines = tail.read()
            idle = idle and not lines
            yield from lines
        if done:
            for tail in tails:
                yield from tail.flush()
            return
        if idle:
            time.sleep(POLL_SECONDS)
