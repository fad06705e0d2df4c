"""Training throughput of the MNIST CNN on this machine, side by side in one run:

    (a) single: one process, default strategy (no TF_CONFIG)
    (b) ps:     1 chief + 1 ps + 2 workers, ParameterServerStrategy
    (c) mwms:   2 workers, MultiWorkerMirroredStrategy
    ps-equal:   (only with --only ps-equal) the ps setup with every replica in a session of
                its own at one nice value, as the local backend ran them before its ps and
                workers yielded the CPU to the chief; the result line adds ps/ps-equal

Each trains on a fixed number of examples of full real MNIST, as real `python -m
trainer.task` processes on 127.0.0.1 with TF_CONFIG from launcher.tfconfig (the local
backend's rules), trainer defaults unless a flag below says otherwise. Examples/s are
measured over the training phase only, from the chief's own Train lines after a warm-up
(TF import, start-up, tracing and the final evaluation excluded). The three runs are
repeated --rounds times in turn (a b c a b c ...) and the ratios b/a and c/a taken per
round, so that load from other work on the machine hits all of them alike; the result
line gives the median ratios.

With --interleave SECONDS a round runs its setups at once instead, each given the
machine in turn for SECONDS while the others are stopped (SIGSTOP/SIGCONT), and each
setup's examples/s counts only the seconds of its own turns. On a shared host the
machine's speed drifts within minutes (on a 2-core VM of the README, three whole runs
of the one process gave 1,758-2,297 examples/s within 15 minutes); slices of a few
seconds put every setup on nearly the same machine, where whole runs one after the
other may each meet a different one. The Train lines then come every 1% of the steps
(5% otherwise), for finer points.

    .venv/bin/python bench/ps_vs_single.py [--examples 96000] [--rounds 2] [--batch-size N] [--interleave 3]
"""
from __future__ import annotations

import argparse
import contextlib
import os
import re
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _common import (SETUPS as BASE_SETUPS, cpu, cpu_seconds, ensure_data, machine, non_negative_float,
                     non_negative_int, positive_int, require, round_arguments, train_points)

# ps-equal (run only when named with --only): the ps setup with every replica in a session of
# its own at one nice value, as the local backend ran them before its ps and workers
# yielded the CPU to the chief
SETUPS = {**BASE_SETUPS, "ps-equal": BASE_SETUPS["ps"]}

from tests.support.trainer_cluster import TrainerCluster  # noqa: E402
from trainer.flags import parser as trainer_flags  # noqa: E402

WARMUP = 0.2  # share of the steps left out of the measurement
POLL_S = 0.1
FINAL = re.compile(r"^Final metrics after \d+ steps: loss ([0-9.]+), accuracy ([0-9.]+)", re.M)


def watch(cluster: TrainerCluster, reporter: str, timeout: float) -> list[tuple[int, float, dict]]:
    """Until every replica has exited: (step, trainer seconds, {replica: CPU seconds so far})
    for each Train line of `reporter`, the CPU times read as the line appears."""
    samples: list[tuple[int, float, dict]] = []
    deadline = time.monotonic() + timeout
    while True:
        points = train_points(cluster.log(reporter))
        if len(points) > len(samples):
            cpu = {name: cpu_seconds(replica.process.pid) for name, replica in cluster.replicas.items()}
            samples += [(step, seconds, cpu) for step, seconds in points[len(samples):]]
        codes = {name: replica.process.poll() for name, replica in cluster.replicas.items()}
        if None not in codes.values():
            if set(codes.values()) != {0}:
                raise RuntimeError(f"exit codes {codes}\n{cluster.tails()}")
            return samples
        if time.monotonic() > deadline:
            raise TimeoutError(f"still running after {timeout:g} s\n{cluster.tails()}")
        time.sleep(POLL_S)


def plan(name: str, args: argparse.Namespace, workdir: Path) -> tuple[dict, list[str], int, int]:
    """A setup's replica counts, trainer flags, steps and examples per global step."""
    counts, _, replicas_per_step = SETUPS[name]
    examples_per_step = args.batch_size * replicas_per_step
    steps = args.examples // examples_per_step
    every = max(1, steps // (100 if args.interleave else 20))  # slices want finer points
    flags = ["--job-dir", str(workdir / "job"), "--data-dir", args.data_dir, "--train-steps", str(steps),
             "--batch-size", str(args.batch_size), "--log-every-steps", str(every),
             "--eval-every-steps", "0", "--checkpoint-every-steps", "0", *args.trainer_flag]
    return counts, flags, steps, examples_per_step


def cluster(name: str, args: argparse.Namespace, workdir: Path) -> TrainerCluster:
    counts, flags, _, _ = plan(name, args, workdir)
    return TrainerCluster(counts, flags, workdir, env={"TRAINER_THREADS": str(args.threads)}, name=name,
                          priority=name != "ps-equal")


def summary(name: str, args: argparse.Namespace, workdir: Path, samples: list, log: str) -> dict:
    """Examples/s and examples per CPU-second (all of its processes) of a setup's training
    phase (its Train lines after the warm-up), and its final test metrics."""
    _, _, steps, examples_per_step = plan(name, args, workdir)
    measured = [sample for sample in samples if sample[0] >= steps * WARMUP]
    if len(measured) < 2:
        raise RuntimeError(f"{name}: too few Train lines after the warm-up: {samples}")
    (step0, seconds0, cpu0), (step1, seconds1, cpu1) = measured[0], measured[-1]
    examples, seconds = (step1 - step0) * examples_per_step, seconds1 - seconds0
    cores = {name: (cpu1[name] - cpu0[name]) / seconds for name in cpu0}
    loss, accuracy = map(float, FINAL.search(log).groups())
    return {"examples_s": examples / seconds, "examples_cpu_s": examples / seconds / sum(cores.values()),
            "cores": cores, "steps": steps, "measured": step1 - step0,
            "seconds": seconds1 - seconds0, "loss": loss, "accuracy": accuracy, "load": machine()}


def run(name: str, args: argparse.Namespace, workdir: Path) -> dict:
    """Train one setup to completion, alone on the machine."""
    reporter = SETUPS[name][1]
    with cluster(name, args, workdir) as job:
        samples = watch(job, reporter, args.timeout)
        log = job.log(reporter)
    return summary(name, args, workdir, samples, log)


class Sliced:
    """A setup started with the others and run only in its slices: its processes get
    SIGCONT when its turn begins and SIGSTOP when it ends. Its Train lines are timed by
    the clock of its own slices (`active`), so the seconds the others ran do not count."""

    def __init__(self, name: str, job: TrainerCluster):
        self.name, self.job, self.reporter = name, job, SETUPS[name][1]
        self.active, self.began, self.samples = 0.0, None, []

    def signal(self, signum: int) -> None:
        for replica in self.job.replicas.values():
            if replica.process.poll() is None:
                try:
                    os.kill(replica.process.pid, signum)
                except ProcessLookupError:
                    pass

    def resume(self) -> None:
        self.signal(signal.SIGCONT)
        self.began = time.monotonic()

    def pause(self) -> None:
        self.observe()
        self.signal(signal.SIGSTOP)
        self.active += time.monotonic() - self.began
        self.began = None

    def clock(self) -> float:
        return self.active + (time.monotonic() - self.began if self.began is not None else 0.0)

    def observe(self) -> None:
        points = train_points(self.job.log(self.reporter))
        if len(points) > len(self.samples):
            now = self.clock()
            cpu = {name: cpu_seconds(replica.process.pid) for name, replica in self.job.replicas.items()}
            self.samples += [(step, now, cpu) for step, _ in points[len(self.samples):]]

    def exited(self) -> bool:
        codes = {name: replica.process.poll() for name, replica in self.job.replicas.items()}
        if None in codes.values():
            return False
        if set(codes.values()) != {0}:
            raise RuntimeError(f"{self.name}: exit codes {codes}\n{self.job.tails()}")
        return True


def interleaved(names: list[str], args: argparse.Namespace, workdir: Path) -> dict[str, dict]:
    """All setups at once, each given the machine in turn for --interleave seconds while
    the others are stopped (SIGSTOP), until all have finished: a change in the machine's
    speed (other tenants of its host) then falls on every setup within seconds of each
    other, where whole runs one after the other can each meet a different machine."""
    deadline = time.monotonic() + args.timeout * len(names)
    with contextlib.ExitStack() as stack:
        setups = []
        for name in names:
            job = stack.enter_context(cluster(name, args, workdir / name))
            setup = Sliced(name, job)
            stack.callback(setup.signal, signal.SIGCONT)  # runs before the job's reaping
            setup.signal(signal.SIGSTOP)
            setups.append(setup)
        live = list(setups)
        while live:
            for setup in list(live):
                setup.resume()
                end = time.monotonic() + args.interleave
                while time.monotonic() < end and not setup.exited():
                    setup.observe()
                    time.sleep(POLL_S)
                setup.pause()
                if setup.exited():
                    live.remove(setup)
                if time.monotonic() > deadline:
                    raise TimeoutError(f"still running after {args.timeout * len(names):g} s: "
                                       f"{[s.name for s in live]}")
        return {s.name: summary(s.name, args, workdir / s.name, s.samples, s.job.log(s.reporter)) for s in setups}


def ratios(results: dict[str, list[dict]], key: str) -> list[str]:
    """`NAME/single MEDIAN (rounds R1, R2)` of `key`, per round, for ps and mwms."""
    out = []
    for name in ("ps", "mwms"):
        if "single" in results and name in results:
            per_round = [b[key] / a[key] for a, b in zip(results["single"], results[name])]
            out.append(f"{name}/single {statistics.median(per_round):.2f} "
                       f"(rounds {', '.join(f'{r:.2f}' for r in per_round)})")
    if "ps" in results and "ps-equal" in results:
        per_round = [b[key] / a[key] for a, b in zip(results["ps-equal"], results["ps"])]
        out.append(f"ps/ps-equal {statistics.median(per_round):.3f} "
                   f"(rounds {', '.join(f'{r:.3f}' for r in per_round)})")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--examples", type=positive_int, default=96_000, help="training examples per run")
    round_arguments(parser)
    parser.add_argument("--batch-size", type=positive_int, default=trainer_flags().get_default("batch_size"),
                        help="per worker (and per process); default: the trainer's")
    parser.add_argument("--threads", type=non_negative_int, default=0,
                        help="TRAINER_THREADS (0: the trainer's default)")
    parser.add_argument("--only", choices=sorted(SETUPS), action="append", help="run only these setups")
    parser.add_argument("--trainer-flag", action="append", default=[], help="extra trainer flag (repeatable)")
    parser.add_argument("--interleave", type=non_negative_float, default=0, metavar="SECONDS",
                        help="run the setups of a round at once, each in turn for SECONDS while the others are "
                             "stopped (SIGSTOP), instead of one after the other (0, the default)")
    args = parser.parse_args()
    names = args.only or list(BASE_SETUPS)
    fewest = min(args.examples // (args.batch_size * SETUPS[name][2]) for name in names)
    if fewest < 10:
        parser.error(f"--examples {args.examples} makes {fewest} global steps at batch {args.batch_size}: "
                     f"give at least {10 * args.batch_size * max(SETUPS[name][2] for name in names)}")
    require("tensorflow")
    ensure_data(args.data_dir)
    results: dict[str, list[dict]] = {name: [] for name in names}
    with tempfile.TemporaryDirectory(prefix="ps-vs-single-") as tmp:
        for round_ in range(args.rounds):
            if args.interleave:
                done = interleaved(names, args, Path(tmp) / f"round-{round_}")
            else:
                done = {name: run(name, args, Path(tmp) / f"{name}-{round_}") for name in names}
            for name in names:
                result = done[name]
                results[name].append(result)
                print(f"round {round_ + 1} {name}: {result['examples_s']:,.0f} examples/s, "
                      f"{result['examples_cpu_s']:,.0f} examples/CPU-s on {sum(result['cores'].values()):.2f} cores "
                      f"({', '.join(f'{n} {c:.2f}' for n, c in result['cores'].items())}) "
                      f"({result['measured']} of {result['steps']} steps in {result['seconds']:.1f} s; "
                      f"final test accuracy {result['accuracy']:.4f}, loss {result['loss']:.4f}; {result['load']})",
                      flush=True)
    rates = [f"{name} {statistics.median(r['examples_s'] for r in runs):,.0f}" for name, runs in results.items()]
    per_cpu = ratios(results, "examples_cpu_s")
    figures = [*rates, *ratios(results, "examples_s"), *(["per CPU-second: " + "; ".join(per_cpu)] if per_cpu else [])]
    rounds = f"rounds in {args.interleave:g}-s slices" if args.interleave else "interleaved rounds"
    print(f"ps_vs_single: examples/s {'; '.join(figures)} — {args.examples:,} examples of real MNIST per run, "
          f"batch {args.batch_size}/worker, medians of {args.rounds} {rounds}; {cpu()}, {machine()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
