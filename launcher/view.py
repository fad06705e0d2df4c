"""What the user sees while a job runs: typed events in, lines or a live table out.

On a terminal, a rich Live display shows the job phase, one row per replica (grouped
by type for big jobs) and a progress bar of training steps (step N of M, steps/s, ETA,
last loss and accuracy), with the followed replica's log lines scrolling above it.
When stdout is not a terminal, every event is one plain line, and the last line sums up
the run. rich is imported only for the live display. No backend knowledge here.
"""
from __future__ import annotations

import dataclasses
import datetime as _dt
import re
import sys
import time
from collections import Counter
from typing import Callable, Iterable, TextIO

from .events import Event, JobCondition, LogLine, Progress, ReplicaPhase, TrainingResult, terminal_safe

MAX_ROWS = 16  # more replicas than this are summarised per replica type
# REASON: why a replica waits or ended, in a word (kubectl's STATUS column: Unschedulable,
# ImagePullBackOff, CrashLoopBackOff, OOMKilled, Completed); -o wide adds the whole message
COLUMNS = ("REPLICA", "PHASE", "REASON", "RESTARTS", "NODE", "AGE", "GPU")
WIDE_COLUMNS = COLUMNS + ("EXIT CODE", "MESSAGE")
_REASON = re.compile(r"([A-Z][A-Za-z]*)(?::|$)")


def duration(seconds: float) -> str:
    """49 -> "49s", 192 -> "3m12s", 7380 -> "2h03m"."""
    seconds = max(int(seconds), 0)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def age(started: str, now: _dt.datetime | None = None) -> str:
    """Age of an RFC 3339 timestamp ("" when unknown)."""
    if not started:
        return ""
    try:
        then = _dt.datetime.fromisoformat(started.replace("Z", "+00:00"))
    except ValueError:
        return ""
    if then.tzinfo is None:
        then = then.replace(tzinfo=_dt.timezone.utc)
    return duration(((now or _dt.datetime.now(_dt.timezone.utc)) - then).total_seconds())


class ProgressTracker:
    """Last Progress seen, with the step rate (reported, else measured) and ETA."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self._clock = clock
        self.last: Progress | None = None
        self._first: tuple[float, int] | None = None
        self._seen_at = 0.0

    def update(self, progress: Progress) -> None:
        now = self._clock()
        if self._first is None or progress.step < self._first[1]:
            self._first = (now, progress.step)
        self.last, self._seen_at = progress, now

    @property
    def rate(self) -> float | None:
        if self.last is None:
            return None
        if self.last.steps_per_sec:
            return self.last.steps_per_sec
        start, first_step = self._first
        elapsed = self._seen_at - start
        return (self.last.step - first_step) / elapsed if elapsed > 0 and self.last.step > first_step else None

    @property
    def eta(self) -> float | None:
        rate = self.rate
        if self.last is None or not self.last.total or not rate:
            return None
        return max(self.last.total - self.last.step, 0) / rate

    def describe(self) -> str:
        """"step 200 of 1000, 16.2 steps/s, ETA 49s, loss 0.2310, accuracy 0.9375"."""
        p = self.last
        if p is None:
            return "waiting for the first training step"
        parts = [f"step {p.step}" + (f" of {p.total}" if p.total else "")]
        if self.rate:
            parts.append(f"{self.rate:.1f} steps/s")
        if self.eta:  # none once the last step is reached: the summary of a finished job said "ETA 0s"
            parts.append(f"ETA {duration(self.eta)}")
        if p.loss is not None:
            parts.append(f"loss {p.loss:.4f}")
        if p.accuracy is not None:
            parts.append(f"accuracy {p.accuracy:.4f}")
        return ", ".join(parts)


def suspended_note(queue: str = "", namespace: str = "") -> str:
    """Why a Suspended job has no pods, and where to look."""
    if not queue:
        return "suspended (runPolicy.suspend: true): no pods until it is resumed"
    where = f" -n {namespace}" if namespace else ""
    return (f"queued in Kueue LocalQueue {queue}: no pods until Kueue admits it "
            f"(kubectl get workloads{where})")


def plain_line(event: Event, job: str, queue: str = "", namespace: str = "") -> str | None:
    """The one line an event prints in plain mode (None: not printed)."""
    if isinstance(event, LogLine):
        return f"[{event.replica}] {event.line}"
    if isinstance(event, JobCondition) and event.type == "Suspended" and event.status in ("True", "False"):
        if event.status == "True":
            return f"{job}: Suspended ({suspended_note(queue, namespace)})"
        detail = "admitted by Kueue" if queue else ": ".join(p for p in (event.reason, event.message) if p)
        return f"{job}: Resumed" + (f" ({detail})" if detail else "")
    if isinstance(event, JobCondition) and event.status == "False":
        # training-operator turns Running False when the job succeeds, fails or is suspended,
        # keeping its "is running" reason and message; the line of that condition says it
        return None
    if isinstance(event, JobCondition):
        detail = ": ".join(part for part in (event.reason, event.message) if part)
        state = event.type if event.status == "True" else f"{event.type}={event.status}"
        return f"{job}: {state}" + (f" ({detail})" if detail else "")
    if isinstance(event, ReplicaPhase):
        extra = [f"restarts {event.restarts}"] if event.restarts else []
        extra += [f"node {event.node}"] if event.node else []
        extra += [f"exit code {event.exit_code}"] if event.exit_code is not None else []
        extra += [event.message] if event.message else []
        return f"[{event.replica}] {event.phase}" + (f" ({', '.join(extra)})" if extra else "")
    return None


def merge_result(old: TrainingResult, new: TrainingResult) -> TrainingResult:
    """Final metrics and the export path arrive on separate lines; keep both."""
    fields = {k: v for k, v in vars(new).items() if v is not None}
    return dataclasses.replace(old, **fields)


def describe_result(result: TrainingResult) -> str:
    parts = []
    if result.accuracy is not None:
        more = "".join(f", {name} {value:.4f}" for name, value in result.metrics or ())
        parts.append(f"test accuracy {result.accuracy:.4f}{more}, loss {result.loss:.4f} after {result.step} steps")
    if result.export_path:
        parts.append(f"model exported to {result.export_path}")
    return "; " + "; ".join(parts) if parts else ""


def reason(message: str) -> str:
    """The REASON column: the reason a replica's message starts with ("ImagePullBackOff:
    Back-off pulling image ..." -> "ImagePullBackOff"), else the whole message (the local
    backend's "exited with code 1")."""
    match = _REASON.match(message)
    return match[1] if match else message


def replica_rows(replicas: Iterable[ReplicaPhase], now: _dt.datetime | None = None,
                 wide: bool = False) -> list[tuple[str, ...]]:
    """Rows for COLUMNS (WIDE_COLUMNS when `wide`): one per replica, or one per replica
    type for big jobs (phases and reasons counted)."""
    replicas = list(replicas)
    if len(replicas) <= MAX_ROWS:
        return [(r.replica, r.phase, reason(r.message), str(r.restarts), r.node, age(r.started, now),
                 str(r.gpus or ""), *((("" if r.exit_code is None else str(r.exit_code)), r.message) if wide else ()))
                for r in replicas]
    rows = []
    for rtype in dict.fromkeys(r.type for r in replicas):
        group = [r for r in replicas if r.type == rtype]
        phases = Counter(r.phase for r in group)
        reasons = Counter(reason(r.message) for r in group if r.message)
        rows.append((f"{rtype.lower()} x{len(group)}", ", ".join(f"{n} {p}" for p, n in phases.items()),
                     ", ".join(f"{n} {why}" for why, n in reasons.items()),
                     str(sum(r.restarts for r in group)), "", "", str(sum(r.gpus for r in group) or ""),
                     *(("", "") if wide else ())))
    return rows


def format_rows(rows: list[tuple[str, ...]], header: tuple[str, ...] = COLUMNS) -> list[str]:
    """Plain, aligned text table (kubectl style) under `header`; its cells' control characters
    shown as text (a cell may hold a cluster's string: an InferenceService's URL, a reason)."""
    table = [header, *([terminal_safe(str(cell)) for cell in row] for row in rows)]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    return ["   ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in table]


def no_resources(namespace: str | None = None) -> str:
    """kubectl's line (on stderr, instead of a bare header) for a list with no rows;
    namespace None: every namespace, or a list without namespaces."""
    return f"No resources found in {namespace} namespace." if namespace else "No resources found"


class JobView:
    """Feed it events with `handle`; use as a context manager around the whole run."""

    def __init__(self, name: str, namespace: str, out: TextIO | None = None, live: bool | None = None,
                 clock: Callable[[], float] = time.monotonic, suspended: bool = False, queue: str = "",
                 wide: bool = False):
        """`suspended`: the job was created suspended (for Kueue's `queue`): the phase is
        Suspended from the start, not Pending or Created, until it is resumed. `wide`: the
        live replica table has WIDE_COLUMNS."""
        self.name, self.namespace = name, namespace
        self.out = out or sys.stdout
        self.live = self.out.isatty() if live is None else live
        self.queue = queue
        self.wide = wide
        self.suspended = suspended
        self.phase = "Suspended" if suspended else "Pending"
        self.replicas: dict[str, ReplicaPhase] = {}
        self.progress = ProgressTracker(clock)
        self.result = TrainingResult()
        self._live = None

    # ---- lifecycle ----------------------------------------------------------------
    def __enter__(self) -> "JobView":
        if self.live:
            from rich.console import Console
            from rich.live import Live

            self._live = Live(get_renderable=self._renderable, console=Console(file=self.out),
                              refresh_per_second=4, transient=False)
            self._live.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    # ---- events -------------------------------------------------------------------
    def seed(self, conditions: Iterable[JobCondition], replicas: Iterable[ReplicaPhase]) -> None:
        """Start from a status snapshot (for `status -w`)."""
        for event in (*conditions, *replicas):
            self.handle(event)

    def handle(self, event: Event) -> None:
        if isinstance(event, JobCondition):
            self._condition(event)
        elif isinstance(event, ReplicaPhase):
            self.replicas[event.replica] = event
        elif isinstance(event, Progress):
            self.progress.update(event)
        elif isinstance(event, TrainingResult):
            self.result = merge_result(self.result, event)
        if self._live is not None:
            self._print_live(event)
        else:
            self._print_plain(plain_line(event, self.name, self.queue, self.namespace))

    def _condition(self, event: JobCondition) -> None:
        """The phase, as `launcher.backends.base.job_phase` sees it."""
        if event.type == "Suspended" and event.status in ("True", "False"):
            self.suspended = event.status == "True"
            self.phase = "Suspended" if self.suspended else "Resumed"
        elif event.status == "True" and not (self.suspended and event.type == "Created"):
            self.phase = event.type
            self.suspended = False

    def summary(self) -> str:
        line = f"{self.name}: {self.phase}"
        if self.progress.last is not None:
            line += f" at {self.progress.describe()}"
        return line + describe_result(self.result)

    def finish(self) -> None:
        """Print the closing summary line (both modes)."""
        if self._live is None:
            self._print_plain(self.summary())
        else:
            self._live.console.print(self.summary(), markup=False, highlight=False)

    # ---- output -------------------------------------------------------------------
    def _print_plain(self, line: str | None) -> None:
        if line is not None:
            print(line, file=self.out, flush=True)

    def _print_live(self, event: Event) -> None:
        if isinstance(event, LogLine):
            from rich.text import Text

            # the display is redrawn around these lines: a control sequence in one would
            # move or clear it (the plain lines of a pipe stay as written, as `kubectl logs`)
            self._live.console.print(Text(terminal_safe(f"[{event.replica}] {event.line}")))

    def _renderable(self):
        from rich.console import Group
        from rich.progress_bar import ProgressBar
        from rich.table import Table
        from rich.text import Text

        header = Text(f"TFJob {self.name} (namespace {self.namespace}): {self.phase}", style="bold")
        if self.phase == "Suspended":
            header.append(f", {suspended_note(self.queue, self.namespace)}", style="yellow")
        table = Table(*(WIDE_COLUMNS if self.wide else COLUMNS), box=None, pad_edge=False)
        for row in replica_rows(self.replicas.values(), wide=self.wide):
            table.add_row(*row)
        last = self.progress.last
        bar = Table.grid(padding=(0, 1))
        bar.add_row(ProgressBar(total=float(last.total) if last and last.total else None,
                                completed=float(last.step) if last else 0.0, width=30),
                    Text(self.progress.describe()))
        return Group(header, table, bar)
