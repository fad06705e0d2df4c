"""Shared by the trainer benchmarks: repo path, real MNIST data, machine figures, and
training-throughput figures read from the chief's `Train` lines."""
from __future__ import annotations

import argparse
import importlib.util
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


def require(*modules: str) -> None:
    """Exit with one line when a module a bench runs is not installed (the trainer's
    TensorFlow: the [trainer] extra; kserve: [serve])."""
    extras = {"tensorflow": "trainer", "kserve": "serve"}
    for module in modules:
        if importlib.util.find_spec(module) is None:  # exit 2, as the trainer's and launcher's refusals
            print(f"{Path(sys.argv[0]).name}: needs {module}, which is not installed here "
                  f"(pip install 'tfjob-launcher[{extras.get(module, module)}]')", file=sys.stderr)
            sys.exit(2)


def ensure_data(data_dir: str) -> None:
    """Full real MNIST as TFRecords in `data_dir` (written once by `python -m trainer.data`)."""
    if not list(Path(data_dir).glob("train-*.tfrecord")):
        subprocess.run([sys.executable, "-m", "trainer.data", "--out", data_dir, "--offline"], cwd=ROOT, check=True,
                       timeout=1800)


# the CPU flags that change TensorFlow's kernels (oneDNN's AVX-512, VNNI and bf16 paths):
# figures differ between machines with and without them
NOTABLE_FLAGS = ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile")


def cpu() -> str:
    """The CPU model, family and model numbers and which of NOTABLE_FLAGS it has (from
    /proc/cpuinfo): every result line says on which machine it was measured."""
    fields: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if not line.strip():
                    break  # the first processor is enough
                key, _, value = line.partition(":")
                fields[key.strip()] = value.strip()
    except OSError:
        return "unknown CPU"
    flags = set(fields.get("flags", "").split())
    have = [flag for flag in NOTABLE_FLAGS if flag in flags]
    no_avx512 = "" if "avx512f" in flags else ", no avx512"
    return (f"{fields.get('model name', 'unknown CPU')} (family {fields.get('cpu family', '?')} model "
            f"{fields.get('model', '?')}; flags {' '.join(have) or 'none of ' + ' '.join(NOTABLE_FLAGS)}{no_avx512})")


def machine() -> str:
    """Core count and load average (1 and 5 min): every figure is printed with these."""
    one, five, _ = os.getloadavg()
    return f"{os.cpu_count()} cores, load average {one:.1f}/{five:.1f}"


def _bounded(kind: type, ok, bound: str):
    """An argparse type: a `kind` (int, or a finite float) for which `ok` holds; a bad value is
    one line and exit 2, `bound` saying what is taken."""
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {'an integer' if kind is int else 'a number'}") from None
        if not (ok(value) and value < float("inf")):
            raise argparse.ArgumentTypeError(f"{text!r}: must be {bound}")
        return value
    return parse


positive_int = _bounded(int, lambda v: v >= 1, "at least 1")
non_negative_int = _bounded(int, lambda v: v >= 0, "0 or more")
positive_float = _bounded(float, lambda v: v > 0, "a number above 0")
non_negative_float = _bounded(float, lambda v: v >= 0, "0 or more")


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
    parser.add_argument("--rounds", type=positive_int, default=2, help="times each setup runs, interleaved")
    parser.add_argument("--data-dir", default=str(DATA_DIR),
                        help="full MNIST as TFRecords (written there first when absent; default: data/mnist)")
    parser.add_argument("--timeout", type=positive_float, default=1200, help="seconds per run")
