"""Time to 99% test accuracy on all of real MNIST (60,000 / 10,000), for parameter-server
training (1 chief + 1 ps + 2 workers) and, for comparison, one process (or 2 workers
MultiWorkerMirrored with --compare mwms), as real processes on 127.0.0.1 started one
setup after the other with trainer defaults unless a flag below says otherwise.

The reporting replica evaluates on the full test set every --eval-every-steps; the first
Eval line at or above --target ends the run (its processes are then stopped). Seconds
are wall time from starting the processes (TensorFlow start-up included). Prints the
curves as `curve SETUP step=N seconds=T accuracy=A` lines, writes them as a PNG plot
(--plot), then one result line:

    time_to_accuracy: ps 99.05% after 1000 steps in 112.3 s; single 99.02% ... plot ...

    .venv/bin/python bench/time_to_accuracy.py [--target 0.99] [--compare single|mwms]
"""
from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from pathlib import Path

from _common import DATA_DIR, SETUPS, ensure_data, machine

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


def run(name: str, args: argparse.Namespace, flags: list[str], workdir: Path) -> list[tuple[int, float, float]]:
    """Train setup `name` until the target accuracy; its curve, printed as it grows."""
    counts, reporter, _ = SETUPS[name]
    curve = []
    began = time.monotonic()
    with TrainerCluster(counts, ["--job-dir", str(workdir / "job"), *flags], workdir,
                        env={"TRAINER_THREADS": str(args.threads)}, name=name) as cluster:
        for point in watch(cluster, reporter, args.target, args.timeout, began):
            curve.append(point)
            print(f"curve {name} step={point[0]} seconds={point[1]:.1f} accuracy={point[2]:.4f}", flush=True)
    return curve


def plot(curves: dict[str, list[tuple[int, float, float]]], target: float, title: list[str], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    figure, axes = pyplot.subplots(figsize=(8, 5))
    for name, curve in curves.items():
        axes.plot([p[1] for p in curve], [p[2] * 100 for p in curve], marker="o", label=LABELS[name])
    axes.axhline(target * 100, color="grey", linestyle="--", linewidth=1, label=f"target {target:.1%}")
    axes.set(xlabel="seconds since start (wall, TensorFlow start-up included)", ylabel="test accuracy (%)",
             title="\n".join(title), ylim=(max(90.0, min(p[2] * 100 for c in curves.values() for p in c) - 0.5), 100))
    axes.grid(True, alpha=0.3)
    axes.legend(loc="lower right")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    pyplot.close(figure)


def outcome(name: str, curve: list[tuple[int, float, float]], target: float) -> str:
    step, seconds, accuracy = curve[-1]
    if accuracy >= target:
        return f"{name} {accuracy:.2%} after {step} steps in {seconds:.1f} s"
    return f"{name} target missed (best {max(p[2] for p in curve):.2%}, {step} steps in {seconds:.1f} s)"


LABELS = {"ps": "1 chief + 1 ps + 2 workers (ParameterServerStrategy)", "single": "one process",
          "mwms": "2 workers (MultiWorkerMirroredStrategy)"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target", type=float, default=0.99)
    parser.add_argument("--compare", choices=("single", "mwms", "none"), default="single",
                        help="the setup to run after parameter-server training")
    parser.add_argument("--data-dir", default=str(DATA_DIR))
    parser.add_argument("--eval-every-steps", type=int, default=100)
    parser.add_argument("--max-steps", type=int, default=20000, help="--train-steps of the trainer")
    parser.add_argument("--threads", type=int, default=0, help="TRAINER_THREADS (0: the trainer's default)")
    parser.add_argument("--trainer-flag", action="append", default=[],
                        help="extra trainer flag, e.g. --trainer-flag=--batch-size=128 (repeatable)")
    parser.add_argument("--plot", default="time_to_accuracy.png", help="PNG file for the accuracy curves")
    parser.add_argument("--timeout", type=float, default=1800, help="per setup")
    args = parser.parse_args()
    ensure_data(args.data_dir)
    flags = ["--data-dir", args.data_dir, "--train-steps", str(args.max_steps),
             "--eval-every-steps", str(args.eval_every_steps), "--checkpoint-every-steps", "0",
             "--log-every-steps", "500", *args.trainer_flag]
    names = ["ps"] + ([args.compare] if args.compare != "none" else [])
    curves = {}
    with tempfile.TemporaryDirectory(prefix="tta-") as tmp:
        for name in names:
            curves[name] = run(name, args, flags, Path(tmp) / name)
    where = f"{machine()}; trainer flags: {' '.join(args.trainer_flag) or 'defaults'}"
    plot(curves, args.target, [f"MNIST CNN: time to {args.target:.1%} test accuracy", where], args.plot)
    results = [outcome(name, curve, args.target) for name, curve in curves.items()]
    print(f"time_to_accuracy: {'; '.join(results)} (wall from process start, full MNIST, evaluated every "
          f"{args.eval_every_steps} steps, target {args.target:.2%}); plot {args.plot}; {where}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
