"""Time to 99% test accuracy: parameter-server training of the MNIST CNN on all of real
MNIST (60,000 / 10,000), 1 chief + 1 ps + 2 workers as local processes on 127.0.0.1.

The chief evaluates on the full test set every --eval-every-steps; the first Eval line at
or above --target ends the run (the cluster is then stopped). Prints the curve as
`curve step=N seconds=T accuracy=A` lines, then one result line:

    time_to_accuracy: 99.05% after 2500 steps in 612.3 s (1 chief + 1 ps + 2 workers, ...)

    .venv/bin/python bench/time_to_accuracy.py [--target 0.99] [--data-dir data/mnist]
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.trainer_cluster import TrainerCluster, reap  # noqa: E402

EVAL = re.compile(r"^Eval step (\d+): loss [0-9.]+, accuracy ([0-9.]+)$", re.M)
POLL_S = 0.5


def ensure_data(data_dir: str) -> None:
    if not list(Path(data_dir).glob("train-*.tfrecord")):
        subprocess.run([sys.executable, "-m", "trainer.data", "--out", data_dir], cwd=ROOT, check=True, timeout=1800)


def watch(cluster: TrainerCluster, target: float, timeout: float, began: float):
    """Yield (step, seconds, accuracy) per new Eval line until the target or the deadline."""
    seen = 0
    deadline = began + timeout
    while time.monotonic() < deadline:
        evals = EVAL.findall(cluster.log("chief-0"))
        for step, accuracy in evals[seen:]:
            yield int(step), time.monotonic() - began, float(accuracy)
            if float(accuracy) >= target:
                return
        seen = len(evals)
        if cluster.replicas["chief-0"].process.poll() is not None:
            raise RuntimeError(f"chief exited before reaching {target:.2%}:\n{cluster.tails()}")
        time.sleep(POLL_S)
    raise TimeoutError(f"{target:.2%} not reached within {timeout:g} s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target", type=float, default=0.99)
    parser.add_argument("--data-dir", default=str(ROOT / "data" / "mnist"))
    parser.add_argument("--batch-size", type=int, default=100, help="per worker")
    parser.add_argument("--learning-rate", type=float, default=1e-3)
    parser.add_argument("--eval-every-steps", type=int, default=250)
    parser.add_argument("--max-steps", type=int, default=20000)
    parser.add_argument("--timeout", type=float, default=3600)
    args = parser.parse_args()
    ensure_data(args.data_dir)
    flags = ["--data-dir", args.data_dir, "--train-steps", str(args.max_steps), "--batch-size", str(args.batch_size),
             "--learning-rate", str(args.learning_rate), "--eval-every-steps", str(args.eval_every_steps),
             "--checkpoint-every-steps", "0", "--log-every-steps", "500"]
    with tempfile.TemporaryDirectory(prefix="tta-") as tmp:
        began = time.monotonic()
        with TrainerCluster({"Chief": 1, "PS": 1, "Worker": 2}, ["--job-dir", f"{tmp}/job", *flags], Path(tmp)) as cluster:
            curve = []
            for point in watch(cluster, args.target, args.timeout, began):
                curve.append(point)
                print(f"curve step={point[0]} seconds={point[1]:.1f} accuracy={point[2]:.4f}", flush=True)
            for replica in cluster.replicas.values():
                reap(replica.process)
    step, seconds, accuracy = curve[-1]
    print(f"time_to_accuracy: {accuracy:.2%} test accuracy after {step} steps in {seconds:.1f} s wall "
          f"(1 chief + 1 ps + 2 workers on 127.0.0.1, batch {args.batch_size}/worker, Adam {args.learning_rate:g}, "
          f"full MNIST, target {args.target:.2%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
