"""Parameter-server throughput with one slow worker, against all workers equal, side by
side in one run:

    (a) equal:   1 chief + 1 ps + 2 workers, trainer defaults but for the threads: every
                 process has one (TRAINER_THREADS=1, where the trainer's own default would
                 give the lone worker of (c) both cores)
    (b) slowed:  the same, worker-1 throttled to --duty of the wall time (0.25: it runs
                 25 ms of every 100 ms, stopped by SIGSTOP/SIGCONT the rest, as a CFS CPU
                 quota, i.e. a pod's CPU limit, throttles a process; what `cpulimit` does)
    (c) one:     1 chief + 1 ps + 1 worker: what worker-0 brings alone

Asynchronous training lets worker-0 go on at its own pace: the chief takes results as
they complete, so (b) should not fall below (c); a chief that waited on the oldest
scheduled call would hold worker-0 to worker-1's pace.
Each setup trains a fixed number of examples of full real MNIST as real `python -m
trainer.task` processes on 127.0.0.1; examples/s are measured from the chief's Train
lines after a warm-up, as in bench/ps_vs_single.py, with each replica's CPU use (cores).
Setups alternate (a b c a b c ...) --rounds times; the result line gives the medians and the
ratios b/a and b/c per round, with the CPU model and the load average.

    .venv/bin/python bench/ps_slow_worker.py [--examples 48000] [--rounds 2] [--duty 0.25]
"""
from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from _common import cpu, ensure_data, machine, positive_float, positive_int, require, round_arguments
from ps_vs_single import WARMUP, watch

from tests.support.trainer_cluster import TrainerCluster  # noqa: E402

SETUPS = {"equal": {"Chief": 1, "PS": 1, "Worker": 2}, "slowed": {"Chief": 1, "PS": 1, "Worker": 2},
          "one": {"Chief": 1, "PS": 1, "Worker": 1}}
PERIOD_S = 0.1


class Throttle:
    """Lets process `pid` run `duty` of every PERIOD_S (SIGCONT), stopped (SIGSTOP) the rest."""

    def __init__(self, pid: int, duty: float):
        self.pid, self.duty = pid, duty
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._cycle, daemon=True)

    def _signal(self, signum: int) -> bool:
        try:
            os.kill(self.pid, signum)
            return True
        except ProcessLookupError:
            return False

    def _cycle(self) -> None:
        while not self._stop.is_set() and self._signal(signal.SIGCONT):
            time.sleep(PERIOD_S * self.duty)
            if self._stop.is_set() or not self._signal(signal.SIGSTOP):
                break
            time.sleep(PERIOD_S * (1 - self.duty))
        self._signal(signal.SIGCONT)

    def __enter__(self) -> "Throttle":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._signal(signal.SIGCONT)


def run(name: str, args: argparse.Namespace, workdir: Path) -> dict:
    steps = args.examples // args.batch_size
    flags = ["--job-dir", str(workdir / "job"), "--data-dir", args.data_dir, "--train-steps", str(steps),
             "--batch-size", str(args.batch_size), "--log-every-steps", str(max(1, steps // 20)),
             "--eval-every-steps", "0", "--checkpoint-every-steps", "0"]
    with TrainerCluster(SETUPS[name], flags, workdir, name=f"slow-{name}") as cluster:
        if name == "slowed":
            with Throttle(cluster.replicas["worker-1"].process.pid, args.duty):
                samples = watch(cluster, "chief-0", args.timeout)
        else:
            samples = watch(cluster, "chief-0", args.timeout)
    measured = [sample for sample in samples if sample[0] >= steps * WARMUP]
    if len(measured) < 2:
        raise RuntimeError(f"{name}: too few Train lines after the warm-up: {samples}")
    (step0, seconds0, cpu0), (step1, seconds1, cpu1) = measured[0], measured[-1]
    seconds = seconds1 - seconds0
    return {"examples_s": (step1 - step0) * args.batch_size / seconds,
            "cores": {replica: (cpu1[replica] - cpu0[replica]) / seconds for replica in cpu0},
            "measured": step1 - step0, "steps": steps, "seconds": seconds}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--examples", type=positive_int, default=48_000, help="training examples per run")
    round_arguments(parser)
    parser.add_argument("--batch-size", type=positive_int, default=100, help="per worker")
    parser.add_argument("--duty", type=positive_float, default=0.25,
                        help="share of wall time the slowed worker-1 may run (above 0, below 1)")
    args = parser.parse_args()
    if args.duty >= 1:
        parser.error(f"argument --duty: {args.duty:g}: give a share below 1 (0.25: 25 ms of every 100 ms)")
    if args.examples // args.batch_size < 20:
        parser.error(f"--examples {args.examples}: give at least {20 * args.batch_size} (20 steps at batch "
                     f"{args.batch_size})")
    require("tensorflow")
    ensure_data(args.data_dir)
    results: dict[str, list[dict]] = {name: [] for name in SETUPS}
    with tempfile.TemporaryDirectory(prefix="ps-slow-worker-") as tmp:
        for round_ in range(args.rounds):
            for name in results:
                result = run(name, args, Path(tmp) / f"{name}-{round_}")
                results[name].append(result)
                print(f"round {round_ + 1} {name}: {result['examples_s']:,.0f} examples/s "
                      f"({', '.join(f'{n} {c:.2f}' for n, c in result['cores'].items())} cores; "
                      f"{result['measured']} of {result['steps']} steps in {result['seconds']:.1f} s; {machine()})",
                      flush=True)
    rates = {name: statistics.median(r["examples_s"] for r in runs) for name, runs in results.items()}
    def ratio(a: str, b: str) -> str:
        rounds = [y["examples_s"] / x["examples_s"] for x, y in zip(results[a], results[b])]
        return f"{b}/{a} {statistics.median(rounds):.2f} (rounds {', '.join(f'{r:.2f}' for r in rounds)})"

    worker1 = statistics.median(r["cores"]["worker-1"] for r in results["slowed"])
    print(f"ps_slow_worker: examples/s 2 workers equal {rates['equal']:,.0f}; worker-1 throttled to {args.duty:.0%} "
          f"(median {worker1:.2f} cores) {rates['slowed']:,.0f}; 1 worker alone {rates['one']:,.0f}; "
          f"{ratio('equal', 'slowed')}; {ratio('one', 'slowed')} — 1 chief + 1 ps, {args.examples:,} "
          f"examples of real MNIST per run, batch {args.batch_size}/worker, medians of {args.rounds} interleaved "
          f"rounds; {cpu()}, {machine()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
