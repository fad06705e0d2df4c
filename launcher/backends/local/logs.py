"""Reading and following the per-replica log files of a local job."""
from __future__ import annotations

import bisect
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterator

from ...events import LogEnded, LogLine

POLL_SECONDS = 0.2


class Times:
    """When a replica's log file reached each size: the supervisor appends "SIZE UNIX_TIME"
    to REPLICA.times in each of its polls (0.1 s) that finds the log grown, and as each
    process ends. A line's time is that of the first record whose size holds the whole
    line: at most one poll after it was written, as the kubelet's time is the runtime's
    read of the line, not the program's write."""

    def __init__(self, path: Path, log: Path):
        self.path, self.log = path, log
        self.sizes: list[int] = []
        self.times: list[float] = []
        self.offset = 0  # bytes of the file parsed

    def _load(self) -> None:
        try:
            with open(self.path, "rb") as handle:
                handle.seek(self.offset)
                data = handle.read()
        except FileNotFoundError:
            return
        whole = data[:data.rfind(b"\n") + 1]  # a record being written waits for the next load
        self.offset += len(whole)
        for record in whole.splitlines():
            try:
                size, when = record.split()
                size_, when_ = int(size), float(when)
            except ValueError:
                continue
            if not self.sizes or size_ > self.sizes[-1]:
                self.sizes.append(size_)
                self.times.append(when_)

    def at(self, end: int) -> float:
        """The time the log first held `end` bytes. Not recorded yet (written within the
        supervisor's last poll) or never (the supervisor was killed): the log's last
        write."""
        if not self.sizes or self.sizes[-1] < end:
            self._load()
        index = bisect.bisect_left(self.sizes, end)
        if index < len(self.sizes):
            return self.times[index]
        try:
            return max(self.log.stat().st_mtime, self.times[-1] if self.times else 0.0)
        except FileNotFoundError:
            return time.time()


def rfc3339(when: float) -> str:
    """A line time as the kubelet gives it with --timestamps: UTC, nanoseconds."""
    seconds, micros = divmod(round(when * 1_000_000), 1_000_000)  # the records keep microseconds
    stamp = datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{stamp}.{micros * 1000:09d}Z"


@dataclass(frozen=True)
class Dating:
    """What `logs` asks of the lines' times: only lines at or after `since` (a Unix time),
    and/or each line prefixed with its time."""
    since: float | None = None
    stamp: bool = False


class Tail:
    """Incremental reader of one log file that may not exist yet; yields whole lines (with
    `times` and `dating`: only those newer than dating.since, prefixed with their time when
    dating.stamp)."""

    def __init__(self, replica: str, path: Path, times: Times | None = None, dating: Dating | None = None):
        self.replica = replica
        self.path = path
        self.offset = 0
        self.partial = b""
        self.times = times if dating and (dating.since is not None or dating.stamp) else None
        self.dating = dating or Dating()

    def read(self, upto: int | None = None) -> list[LogLine]:
        """The whole lines written since the last read (with `upto`, of the file's first
        `upto` bytes only)."""
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read() if upto is None else f.read(max(upto - self.offset, 0))
        except FileNotFoundError:
            return []
        end = self.offset - len(self.partial)  # where the held partial line starts in the file
        self.offset += len(data)
        *lines, self.partial = (self.partial + data).split(b"\n")
        found = []
        for raw in lines:
            end += len(raw) + 1
            found += self._line(raw, end)
        return found

    def flush(self) -> list[LogLine]:
        """The last line when the file does not end with a newline."""
        rest, self.partial = self.partial, b""
        return self._line(rest, self.offset) if rest else []

    def _line(self, raw: bytes, end: int) -> list[LogLine]:
        """The line that ends at byte `end` of the file: none if older than dating.since."""
        text = raw.decode("utf-8", "replace").rstrip("\r")
        if self.times is None:
            return [LogLine(self.replica, text)]
        when = self.times.at(end)
        if self.dating.since is not None and when < self.dating.since:
            return []
        return [LogLine(self.replica, f"{rfc3339(when)} {text}" if self.dating.stamp else text)]


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


def follow_logs(tails: list[Tail], state: Callable[[], tuple[bool, dict[str, list[int | None]] | None]],
                tail_lines: int | None = None, ends: bool = False) -> Iterator[LogLine | LogEnded]:
    """New lines of every replica as they come (files appear when a replica starts and
    grow across restarts) until the job is finished and every file is drained; with
    `tail_lines`, of what each file holds already only its last lines come first (kubectl's
    -f --tail). `state()`: whether the job is finished, and for each replica the size its
    log file had when each of its processes ended (None: not recorded), or None instead
    of those sizes when the files are no longer the job's (deleted, replaced): the
    follow ends without reading them; with `ends`, a
    LogEnded follows the last line of each process, before the next one's first line (one
    file spans a replica's restarts)."""
    if tail_lines is not None:
        for tail in tails:
            yield from last(tail.read(), tail_lines)
    told = {tail.replica: 0 for tail in tails}
    while True:
        done, ended = state()  # checked before reading: what an ended process wrote is in its file
        if ended is None:  # the job's files are gone, or a new job's of its name: nothing more is its
            return
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
