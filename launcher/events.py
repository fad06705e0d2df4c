"""Typed events every backend yields and the view and exit code consume.

Backends never print; they map what they see (pod/TFJob watch events, local process
state) into these. The CLI never knows which backend produced them.
"""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Union

TERMINAL = ("Succeeded", "Failed")

# What a terminal acts on instead of showing: C0 controls but tab and newline, DEL, and C1
# controls (U+009B is CSI where 8-bit controls are on). Strings from a cluster (a condition's
# or a pod's message, a termination message the container wrote, an event's message) can
# hold them, and whoever can write those strings could otherwise move the cursor, rewrite
# what is shown, set the window title or write the clipboard (OSC 52) in the user's terminal.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_SHOWN = {"\x1b": "^[", "\r": "\\r"}  # kubectl's printers (cli-runtime EscapeTerminal)


def terminal_safe(text: str) -> str:
    """`text` with every control character shown instead of acted on: ESC as ^[ and CR as
    \\r (as kubectl prints them), the others as \\xNN; tab and newline kept."""
    return _CONTROL.sub(lambda m: _SHOWN.get(m[0], f"\\x{ord(m[0]):02x}"), text)


def _shown_safely(event) -> None:
    """An event's text fields made terminal_safe (every output of the event is then safe:
    status, the live view, plain lines; JSON and YAML escape them anyway)."""
    for field in dataclasses.fields(event):
        value = getattr(event, field.name)
        if isinstance(value, str) and _CONTROL.search(value):
            object.__setattr__(event, field.name, terminal_safe(value))


@dataclass(frozen=True)
class JobCondition:
    """A TFJob condition transition: Created, Running, Restarting, Succeeded, Failed."""

    type: str
    status: str = "True"
    reason: str = ""
    message: str = ""
    time: str = ""

    __post_init__ = _shown_safely

    @property
    def terminal(self) -> bool:
        return self.type in TERMINAL and self.status == "True"


@dataclass(frozen=True)
class ReplicaPhase:
    """One replica's state: `replica` is the short id like "worker-1"."""

    replica: str
    type: str  # TFJob replica type: Chief, PS, Worker, Evaluator
    index: int
    phase: str  # Pending, Running, Succeeded, Failed, Unknown
    restarts: int = 0
    node: str = ""
    started: str = ""  # RFC 3339 start time, "" if not started
    gpus: int = 0
    exit_code: int | None = None
    message: str = ""

    __post_init__ = _shown_safely


@dataclass(frozen=True)
class LogLine:
    replica: str
    line: str


@dataclass(frozen=True)
class LogEnded:
    """The log of one container instance of `replica` has been read to its end: the
    instance that ran after `restarts` restarts (the `restarts` of the ReplicaPhase that says
    it ended). Only `Backend.logs(follow=True, ends=True)` yields these; the live view holds
    the replica's end until its last lines are out."""

    replica: str
    restarts: int


@dataclass(frozen=True)
class Progress:
    """Training progress parsed from the chief's `Train [...] step N: ...` lines."""

    step: int
    total: int | None = None
    loss: float | None = None
    accuracy: float | None = None
    steps_per_sec: float | None = None


@dataclass(frozen=True)
class TrainingResult:
    """What the chief reports at the end: final test metrics, or where it exported."""

    step: int | None = None
    loss: float | None = None
    accuracy: float | None = None
    export_path: str | None = None
    # the model's other metrics on that line, in its order (the taxi model's ("auc", 0.9554))
    metrics: tuple[tuple[str, float], ...] | None = None

    __post_init__ = _shown_safely  # export_path: read from the chief's log


Event = Union[JobCondition, ReplicaPhase, LogLine, Progress, TrainingResult]


def short_replica(rtype: str, index: int) -> str:
    return f"{rtype.lower()}-{index}"


# Matches the trainer's progress line, e.g.
# "Train [chief/0] step 200 of 1000: loss 0.2310, accuracy 0.9375 (12.3 s) 16.2 global steps/s"
_TRAIN = re.compile(
    r"Train \[[^\]]*\] step (?P<step>\d+)(?: of (?P<total>\d+))?: loss (?P<loss>[-0-9.eE+naif]+), "
    r"accuracy (?P<acc>[-0-9.eE+naif]+).*?(?:(?P<rate>[0-9.]+) global steps/s)?\s*$")


def parse_progress(line: str) -> Progress | None:
    match = _TRAIN.search(line)
    if not match:
        return None
    return Progress(
        step=int(match["step"]),
        total=int(match["total"]) if match["total"] else None,
        loss=float(match["loss"]),
        accuracy=float(match["acc"]),
        steps_per_sec=float(match["rate"]) if match["rate"] else None,
    )


_NUMBER = r"[-0-9.eE+naif]+"
_FINAL = re.compile(rf"Final metrics after (?P<step>\d+) steps: loss (?P<loss>{_NUMBER}), "
                    rf"accuracy (?P<acc>{_NUMBER})(?P<more>(?:, [a-z][a-z0-9_]* {_NUMBER})*)")
_EXPORTED = re.compile(r"Exported model to (?P<path>\S+)\s*$")


def evaluator_line(line: str) -> bool:
    """Whether the live view shows this line of a side-car evaluator: its `Eval step N: ...`
    results, a checkpoint it skipped and the trainer's one-line errors, not its SIGTERM when
    the job's end stops it."""
    return line.startswith(("Eval step ", "Skipped ")) or (
        line.startswith("trainer: ") and not line.startswith("trainer: SIGTERM"))


def parse_result(line: str) -> TrainingResult | None:
    """The chief's `Final metrics after N steps: ...` or `Exported model to PATH` line."""
    match = _FINAL.search(line)
    if match:
        more = tuple((name, float(value)) for name, value in
                     (pair.split(" ") for pair in match["more"].split(", ")[1:]))
        return TrainingResult(step=int(match["step"]), loss=float(match["loss"]), accuracy=float(match["acc"]),
                              metrics=more or None)
    match = _EXPORTED.search(line)
    if match:
        return TrainingResult(export_path=match["path"])
    return None
