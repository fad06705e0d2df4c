"""Render + validate time for 1 chief + 1000 workers + 50 ps, and the start-up time of
`python -m launcher render` as a subprocess (target < 0.5 s), each the median of --repeat
calls after a first one (the render's includes the CRD schema load, printed apart; the
start-up's warms the schema cache, not printed). One line per figure, the second with the
CPU model and the load average.

    .venv/bin/python bench/render_scale.py [--repeat 10]
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from _common import cpu, positive_int  # noqa: E402
from launcher.render import render  # noqa: E402
from launcher.spec import JobSpec, ReplicaSpec  # noqa: E402
from launcher.validate import crd_path, validate  # noqa: E402

STARTUP_TARGET = 0.5


def big_spec() -> JobSpec:
    return JobSpec(name="scale", replicas={"Chief": ReplicaSpec(1), "Worker": ReplicaSpec(1000, cpu="2"),
                                           "PS": ReplicaSpec(50, memory="8Gi")})


def render_and_validate(repeat: int) -> tuple[float, float]:
    """(first call incl. schema load, median of the warm calls), in seconds."""
    spec = big_spec()
    times = []
    for _ in range(repeat + 1):
        start = time.perf_counter()
        validate(render(spec))
        times.append(time.perf_counter() - start)
    return times[0], statistics.median(times[1:])


def startup(repeat: int) -> tuple[float, float]:
    """Medians of (wall, CPU user+sys) time of a fresh `python -m launcher render` process.
    CPU time is the figure to trust on a busy machine; wall time includes waiting for a core."""
    argv = [sys.executable, "-m", "launcher", "render", "--name", "bench", "--workers", "1000", "--ps", "50"]
    subprocess.run(argv, cwd=REPO, check=True, capture_output=True)  # warm the schema cache
    walls, cpus = [], []
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(argv, cwd=REPO, check=True, capture_output=True)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return statistics.median(walls), statistics.median(cpus)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=positive_int, default=10, help="timed calls of each figure (median)")
    args = parser.parse_args()
    if crd_path() is None:
        sys.exit("the TFJob CRD is missing (../shared/crds/kubeflow.org_tfjobs.yaml or $TFJOB_CRD)")
    first, warm = render_and_validate(args.repeat)
    print(f"render+validate 1 chief + 1000 workers + 50 ps: {warm * 1000:.1f} ms warm "
          f"(median of {args.repeat}), {first * 1000:.0f} ms first call incl. schema load")
    wall, cpu_s = startup(args.repeat)
    verdict = "within" if wall < STARTUP_TARGET else "OVER"
    print(f"python -m launcher render start-up: {wall * 1000:.0f} ms wall, {cpu_s * 1000:.0f} ms CPU "
          f"(medians of {args.repeat}; wall {verdict} the {STARTUP_TARGET * 1000:.0f} ms target; "
          f"{cpu()}, load average {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
