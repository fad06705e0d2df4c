"""Start-up of parameter-server training on this machine, side by side with one process:
how long after the processes start each replica serves, the chief has built its model on
the ps (its `No checkpoint ... starting at step 0` line) and the first Train line comes
(after the first --log-every-steps steps: the train function traced, sent to the workers
and run). Real `python -m trainer.task` processes on 127.0.0.1 with TF_CONFIG from
launcher.tfconfig, as the local backend starts them (all at once), trainer defaults
otherwise; the setups run --rounds times in turn (ps ps-whole single ps ps-whole single
...). Times are when each line first appears in the replica's log (polled every 20 ms).

    ps        the servers import the few TensorFlow modules a server uses (task.serve)
    ps-whole  the same job, its servers importing all of TensorFlow, as they do when
              TensorFlow would load plugins (task.tensorflow_plugins): here made so by
              TF_PLUGGABLE_DEVICE_LIBRARY_PATH naming an empty directory (nothing loaded)
    single    one process

    .venv/bin/python bench/ps_startup.py [--rounds 3] [--steps 20]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _common import SETUPS, cpu, ensure_data, machine, positive_int, require, round_arguments

from tests.support.trainer_cluster import TrainerCluster  # noqa: E402

POLL_S = 0.02
MARKS = {"serving": "Serving ", "built": "starting at step 0", "first Train line": "Train ["}


def run(name: str, args: argparse.Namespace, workdir: Path) -> dict[str, float]:
    """Seconds from the start to each mark (`serving`: the last server's line)."""
    counts, reporter, _ = SETUPS["ps" if name == "ps-whole" else name]
    env = {"TRAINER_THREADS": "0"}  # the trainer's own thread counts, as the local backend leaves them
    if name == "ps-whole":
        (workdir / "no-plugins").mkdir(parents=True)
        env["TF_PLUGGABLE_DEVICE_LIBRARY_PATH"] = str(workdir / "no-plugins")
    flags = ["--job-dir", str(workdir / "job"), "--data-dir", args.data_dir, "--train-steps", str(args.steps),
             "--log-every-steps", str(args.steps // 2), "--eval-every-steps", "0", "--checkpoint-every-steps", "0"]
    seen: dict[str, float] = {}
    began = time.monotonic()
    with TrainerCluster(counts, flags, workdir, env=env, name=name) as cluster:
        servers = [replica for replica in cluster.replicas if replica != reporter]
        deadline = began + args.timeout
        while "first Train line" not in seen:
            now = time.monotonic() - began
            if servers and "serving" not in seen and all(MARKS["serving"] in cluster.log(s) for s in servers):
                seen["serving"] = now
            for mark in ("built", "first Train line"):
                if mark not in seen and MARKS[mark] in cluster.log(reporter):
                    seen[mark] = now
            if cluster.replicas[reporter].process.poll() is not None and "first Train line" not in seen:
                raise RuntimeError(f"{reporter} exited before its first Train line:\n{cluster.tails()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"no first Train line after {args.timeout:g} s\n{cluster.tails()}")
            time.sleep(POLL_S)
    return seen


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    round_arguments(parser)
    parser.add_argument("--steps", type=positive_int, default=20,
                        help="--train-steps; the first Train line comes at half")
    args = parser.parse_args()
    if args.steps < 2:
        parser.error("argument --steps: give at least 2 (the first Train line comes at half of them)")
    require("tensorflow")
    ensure_data(args.data_dir)
    results: dict[str, list[dict[str, float]]] = {"ps": [], "ps-whole": [], "single": []}
    with tempfile.TemporaryDirectory(prefix="ps-startup-") as tmp:
        for round_ in range(args.rounds):
            for name in results:
                seen = run(name, args, Path(tmp) / f"{name}-{round_}")
                results[name].append(seen)
                print(f"round {round_ + 1} {name}: " + ", ".join(f"{mark} {at:.2f} s" for mark, at in seen.items())
                      + f" ({machine()})", flush=True)
    median = {name: {mark: statistics.median(r[mark] for r in runs) for mark in runs[0]}
              for name, runs in results.items()}
    parts = [f"{name}: " + ", ".join(f"{mark} {at:.1f} s" for mark, at in marks.items())
             for name, marks in median.items()]
    ratios = []
    for name in ("ps", "ps-whole"):
        per_round = [p["first Train line"] / s["first Train line"] for p, s in zip(results[name], results["single"])]
        ratios.append(f"{name}/single {statistics.median(per_round):.2f} "
                      f"(rounds {', '.join(f'{r:.2f}' for r in per_round)})")
    print(f"ps_startup: seconds from start, medians of {args.rounds} interleaved rounds: {'; '.join(parts)}; "
          f"first Train line {'; '.join(ratios)}; {cpu()}, {machine()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
