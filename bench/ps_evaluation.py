"""What the chief's periodic evaluation costs parameter-server training, side by side in
one run: 1 chief + 1 ps + 2 workers on full real MNIST, (a) without periodic evaluation
(--eval-every-steps 0) and (b) evaluating the 10,000 test images every --every steps.

The chief runs on a CPU of its own and the ps and the workers share the others (each
process pinned with sched_setaffinity, every thread), as on a cluster where the chief has
a node of its own: what (b) loses against (a) is then what the evaluation holds up
dispatch, not CPU taken from the workers. Global steps/s are measured from the chief's
Train lines after the first (start-up and tracing excluded), over the same steps in both
setups. The two setups run --rounds times in turn (a b a b ...) and the ratio b/a is
taken per round; the result line gives the median.

    .venv/bin/python bench/ps_evaluation.py [--rounds 2] [--steps 700] [--every 100]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

from _common import SETUPS, cpu, ensure_data, machine, positive_int, require, round_arguments, train_points

from tests.support.trainer_cluster import TrainerCluster  # noqa: E402

CHIEF = "chief-0"


def pin(pid: int, cpus: set[int]) -> None:
    """Every thread of process `pid` (and the threads they start) onto `cpus`."""
    for task in os.listdir(f"/proc/{pid}/task"):
        os.sched_setaffinity(int(task), cpus)


def run(every: int, args: argparse.Namespace, workdir: Path) -> float:
    """Global steps/s of one PS run, from its first Train line to its last."""
    counts, reporter, _ = SETUPS["ps"]
    flags = ["--job-dir", str(workdir / "job"), "--data-dir", args.data_dir, "--train-steps", str(args.steps),
             "--log-every-steps", str(args.every), "--eval-every-steps", str(every),
             "--checkpoint-every-steps", "0"]
    cpus = sorted(os.sched_getaffinity(0))
    with TrainerCluster(counts, flags, workdir, env={"TRAINER_THREADS": "0"}, name=f"eval-{every}") as cluster:
        for name, replica in cluster.replicas.items():
            pin(replica.process.pid, {cpus[0]} if name == CHIEF else set(cpus[1:]))
        codes = cluster.wait(timeout=args.timeout)
        if set(codes.values()) != {0}:
            raise RuntimeError(f"exit codes {codes}\n{cluster.tails()}")
        points = train_points(cluster.log(reporter))
    (step0, seconds0), (step1, seconds1) = points[0], points[-1]
    return (step1 - step0) / (seconds1 - seconds0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    round_arguments(parser)
    parser.add_argument("--steps", type=positive_int, default=700, help="--train-steps of each run")
    parser.add_argument("--every", type=positive_int, default=100, help="--eval-every-steps of the evaluating runs")
    args = parser.parse_args()
    if args.steps < 2 * args.every:
        parser.error(f"--steps {args.steps}: give at least twice --every ({2 * args.every}): the steps/s are "
                     f"measured between the chief's Train lines, one every --every steps")
    if len(os.sched_getaffinity(0)) < 2:
        parser.error("needs at least 2 CPUs: one for the chief, the others for the ps and the workers")
    require("tensorflow")
    ensure_data(args.data_dir)
    rates: dict[int, list[float]] = {0: [], args.every: []}
    with tempfile.TemporaryDirectory(prefix="ps-evaluation-") as tmp:
        for round_ in range(args.rounds):
            for every in rates:
                rates[every].append(run(every, args, Path(tmp) / f"{every}-{round_}"))
                print(f"round {round_ + 1} eval every {every or 'never'}: {rates[every][-1]:.2f} global steps/s "
                      f"({machine()})", flush=True)
    ratios = [b / a for a, b in zip(rates[0], rates[args.every])]
    print(f"ps_evaluation: global steps/s without periodic evaluation {statistics.median(rates[0]):.2f}, "
          f"evaluating every {args.every} steps {statistics.median(rates[args.every]):.2f}: ratio "
          f"{statistics.median(ratios):.2f} (rounds {', '.join(f'{r:.2f}' for r in ratios)}) — chief on a CPU of its "
          f"own, ps and 2 workers on the other{'s' if len(os.sched_getaffinity(0)) > 2 else ''}, {args.steps} steps, "
          f"medians of {args.rounds} interleaved rounds; {cpu()}, {machine()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
