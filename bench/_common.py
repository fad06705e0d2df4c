"""Shared by the trainer benchmarks: repo path, real MNIST data, machine figures, and
training-throughput figures read from the chief's `Train` lines."""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA_DIR = ROOT / "data" / "mnist"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# name -> (replicas, the replica that logs and evaluates, training replicas per global step)
SETUPS = {
    "single": ({"Chief": 1}, "chief-0", 1),  # one replica: no TF_CONFIG
    "ps": ({"Chief": 1, "PS": 1, "Worker": 2}, "chief-0", 1),  # a global step = one worker's batch
    "mwms": ({"Worker": 2}, "worker-0", 2),  # a global step = a batch on each worker
}

# Train [chief/0] step 200 of 1000: loss 0.2310, accuracy 0.9375 (12.3 s) 16.2 global steps/s
TRAIN = re.compile(r"^Train \[\S+\] step (\d+) of \d+: .*\(([0-9.]+) s\)", re.M)


def ensure_data(data_dir: str) -> None:
    """Full real MNIST as TFRecords in `data_dir` (written once by `python -m trainer.data`)."""
    if not list(Path(data_dir).glob("train-*.tfrecord")):
        subprocess.run([sys.executable, "-m", "trainer.data", "--out", data_dir, "--offline"], cwd=ROOT, check=True,
                       timeout=1800)


def machine() -> str:
    """Core count and load average (1 and 5 min): every figure is printed with these."""
    one, five, _ = os.getloadavg()
    return f"{os.cpu_count()} cores, load average {one:.1f}/{five:.1f}"


def train_points(log: str) -> list[tuple[int, float]]:
    """(global step, seconds since the trainer began) of every Train line."""
    return [(int(step), float(seconds)) for step, seconds in TRAIN.findall(log)]


def cpu_seconds(pid: int) -> float:
    """User + system CPU time so far of process `pid` (all its threads); 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().decode("ascii", "replace").rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def round_arguments(parser: argparse.ArgumentParser) -> None:
    """--rounds, --data-dir and --timeout: those of the benches that run their setups in
    turn, round after round."""
    parser.add_argument("--rounds", type=int, default=2, help="times each setup runs, interleaved")
    parser.add_argument("--data-dir", default=str(DATA_DIR))
    parser.add_argument("--timeout", type=float, default=1200, help="per run")
