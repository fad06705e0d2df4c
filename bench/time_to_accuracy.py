"""Time to 99% test accuracy on all of real MNIST (60,000 / 10,000), for parameter-server
training (1 chief + 1 ps + 2 workers) and, for comparison, one process (or 2 workers
MultiWorkerMirrored with --compare mwms, or with --compare ps-equal the same PS job with
every replica in a session of its own at one nice value, as the local backend ran them
before its ps and workers yielded the CPU to the chief), as real processes on 127.0.0.1
started one setup after the other with trainer defaults unless a flag below says otherwise.

The reporting replica evaluates on the full test set every --eval-every-steps; the first
Eval line at or above --target ends the run (its processes are then stopped). Seconds
are wall time from starting the processes (TensorFlow start-up included). With --runs N
the setups run N times, interleaved (ps single ps single ...), and the result gives the
median (of an even count, the faster of the middle two) and the slowest run of each, and
the ratio of the two medians when both reached the target. Prints the curves as `curve
SETUP#RUN step=N seconds=T accuracy=A` lines, writes them as a PNG plot (--plot), then one
result line:

    time_to_accuracy: ps 99.05% after 800 steps in 90.3 s (median of 3; slowest 101.2 s); ...; ps/single 1.15x (...)

    .venv/bin/python bench/time_to_accuracy.py [--runs 3] [--target 0.99] [--compare single|mwms|ps-equal|none]
"""
from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _common import (DATA_DIR, SETUPS, cpu, ensure_data, machine, non_negative_int, positive_float,
                     positive_int, require)

from tests.support.trainer_cluster import TrainerCluster  # noqa: E402

EVAL = re.compile(r"^Eval step (\d+): loss [0-9.]+, accuracy ([0-9.]+)$", re.M)
POLL_S = 0.2


def watch(cluster: TrainerCluster, reporter: str, target: float, timeout: float, began: float):
    """Yield (step, seconds, accuracy) per new Eval line until the target, the end of
    training (--max-steps) or the deadline."""
    seen = 0
    deadline = began + timeout
    while time.monotonic() < deadline:
        evals = EVAL.findall(cluster.log(reporter))
        for step, accuracy in evals[seen:]:
            yield int(step), time.monotonic() - began, float(accuracy)
            if float(accuracy) >= target:
                return
        seen = len(evals)
        if cluster.replicas[reporter].process.poll() is not None:  # --max-steps done, target missed
            if cluster.replicas[reporter].process.returncode != 0 or not evals:
                raise RuntimeError(f"{reporter} failed:\n{cluster.tails()}")
            return
        time.sleep(POLL_S)
    raise TimeoutError(f"{target:.2%} not reached within {timeout:g} s")


def run(name: str, number: int, args: argparse.Namespace, flags: list[str],
        workdir: Path) -> list[tuple[int, float, float]]:
    """Train setup `name` (run `number`) until the target accuracy; its curve, printed as it grows."""
    counts, reporter, _ = SETUPS["ps" if name == "ps-equal" else name]
    curve = []
    began = time.monotonic()
    with TrainerCluster(counts, ["--job-dir", str(workdir / "job"), *flags], workdir,
                        env={"TRAINER_THREADS": str(args.threads)}, name=name,
                        priority=name != "ps-equal") as cluster:
        for point in watch(cluster, reporter, args.target, args.timeout, began):
            curve.append(point)
            print(f"curve {name}#{number} step={point[0]} seconds={point[1]:.1f} accuracy={point[2]:.4f}", flush=True)
    return curve


def plot(curves: dict[str, list[list[tuple[int, float, float]]]], target: float, title: list[str],
         path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    figure, axes = pyplot.subplots(figsize=(8, 5))
    colors = {"ps": "tab:blue", "single": "tab:orange", "mwms": "tab:green", "ps-equal": "tab:purple"}
    for name, runs in curves.items():
        for number, curve in enumerate(runs):
            axes.plot([p[1] for p in curve], [p[2] * 100 for p in curve], marker="o", color=colors[name],
                      alpha=1.0 if number == 0 else 0.5, label=LABELS[name] if number == 0 else None)
    axes.axhline(target * 100, color="grey", linestyle="--", linewidth=1, label=f"target {target:.1%}")
    axes.set(xlabel="seconds since start (wall, TensorFlow start-up included)", ylabel="test accuracy (%)",
             title="\n".join(title),
             ylim=(max(90.0, min(p[2] * 100 for runs in curves.values() for c in runs for p in c) - 0.5), 100))
    axes.grid(True, alpha=0.3)
    axes.legend(loc="lower right")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    pyplot.close(figure)


def median_run(runs: list[list[tuple[int, float, float]]], target: float) -> tuple[int, float, float]:
    """(step, seconds, accuracy) at the end of the median run by time (a run that missed the
    target counts as the slowest)."""
    reached = sorted((c for c in runs if c[-1][2] >= target), key=lambda c: c[-1][1])
    ordered = reached + [c for c in runs if c[-1][2] < target]
    return ordered[(len(ordered) - 1) // 2][-1]


def outcome(name: str, runs: list[list[tuple[int, float, float]]], target: float) -> str:
    """The median run by time (a run that missed the target counts as the slowest)."""
    missed = [curve for curve in runs if curve[-1][2] < target]
    reached = sorted((curve for curve in runs if curve[-1][2] >= target), key=lambda c: c[-1][1])
    step, seconds, accuracy = median_run(runs, target)
    spread = ""
    if len(runs) > 1:
        slowest = f"slowest {reached[-1][-1][1]:.1f} s" if reached else "none reached it"
        spread = f" (median of {len(runs)}; {slowest}{f', {len(missed)} missed' if missed and reached else ''})"
    # where the time goes: the first Eval line (start-up, the first steps, one evaluation), then the pace
    first = statistics.median(curve[0][1] for curve in runs)
    pace = [(c[-1][1] - c[0][1]) / (c[-1][0] - c[0][0]) * 100 for c in runs if c[-1][0] > c[0][0]]
    parts = f"; first Eval (step {runs[0][0][0]}) at {first:.1f} s" + (
        f", then {statistics.median(pace):.1f} s per 100 steps" if pace else "")
    if accuracy >= target:
        return f"{name} {accuracy:.2%} after {step} steps in {seconds:.1f} s{spread}{parts}"
    best = max(p[2] for curve in runs for p in curve)
    return f"{name} target missed (best {best:.2%}, {step} steps in {seconds:.1f} s){spread}{parts}"


def median_seconds(runs: list[list[tuple[int, float, float]]], target: float) -> float | None:
    """The seconds of outcome()'s median run, None when that run missed the target."""
    _, seconds, accuracy = median_run(runs, target)
    return seconds if accuracy >= target else None


LABELS = {"ps": "1 chief + 1 ps + 2 workers (ParameterServerStrategy)", "single": "one process",
          "mwms": "2 workers (MultiWorkerMirroredStrategy)",
          "ps-equal": "the same PS job, every replica with an equal share of the CPU"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target", type=positive_float, default=0.99,
                        help="test accuracy that ends a run (a fraction: 0.99 is 99%%)")
    parser.add_argument("--compare", choices=("single", "mwms", "ps-equal", "none"), default="single",
                        help="the setup to run after parameter-server training")
    parser.add_argument("--data-dir", default=str(DATA_DIR),
                        help="full MNIST as TFRecords (written there first when absent; default: data/mnist)")
    parser.add_argument("--eval-every-steps", type=positive_int, default=100,
                        help="steps between the reporting replica's evaluations of the full test set")
    parser.add_argument("--max-steps", type=positive_int, default=1000,
                        help="--train-steps of the trainer: the length of its learning-rate schedule")
    parser.add_argument("--threads", type=non_negative_int, default=0,
                        help="TRAINER_THREADS (0: the trainer's default)")
    parser.add_argument("--trainer-flag", action="append", default=[],
                        help="extra trainer flag, e.g. --trainer-flag=--batch-size=128 (repeatable)")
    parser.add_argument("--runs", type=positive_int, default=1, help="times each setup runs, interleaved")
    parser.add_argument("--plot", default="time_to_accuracy.png", help="PNG file for the accuracy curves")
    parser.add_argument("--timeout", type=positive_float, default=1800, help="seconds per run of a setup")
    args = parser.parse_args()
    if args.target > 1:
        parser.error(f"argument --target: {args.target:g}: give a fraction of 1 (0.99 for 99%)")
    require("tensorflow")
    ensure_data(args.data_dir)
    flags = ["--data-dir", args.data_dir, "--train-steps", str(args.max_steps),
             "--eval-every-steps", str(args.eval_every_steps), "--checkpoint-every-steps", "0",
             "--log-every-steps", "500", *args.trainer_flag]
    names = ["ps"] + ([args.compare] if args.compare != "none" else [])
    curves: dict[str, list] = {name: [] for name in names}
    with tempfile.TemporaryDirectory(prefix="tta-") as tmp:
        for number in range(1, args.runs + 1):
            for name in names:
                curves[name].append(run(name, number, args, flags, Path(tmp) / f"{name}-{number}"))
    where = f"{cpu()}, {machine()}; trainer flags: {' '.join(args.trainer_flag) or 'defaults'}"
    plot(curves, args.target, [f"MNIST CNN: time to {args.target:.1%} test accuracy", where], args.plot)
    results = [outcome(name, runs, args.target) for name, runs in curves.items()]
    if args.compare != "none":  # the ratio of the medians, when both setups reached the target
        medians = {name: median_seconds(runs, args.target) for name, runs in curves.items()}
        if None not in medians.values():
            results.append(f"ps/{args.compare} {medians['ps'] / medians[args.compare]:.2f}x")
    print(f"time_to_accuracy: {'; '.join(results)} (wall from process start, full MNIST, evaluated every "
          f"{args.eval_every_steps} steps, target {args.target:.2%}); plot {args.plot}; {where}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
