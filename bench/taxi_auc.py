"""AUC of the Chicago taxi tips wide & deep model (`--model taxi`, label: big tipper, tips >
20% of the fare) on the eval split after a fixed number of training examples, side by
side in one run:

    (a) single: one process (no TF_CONFIG)
    (b) ps:     1 chief + 1 ps + 4 workers (the seed's config_ps.yaml), ParameterServerStrategy
    (c) a logistic regression baseline, fitted in this process on the same training split
        (z-scored numbers and one-hot payment type, company, hour, weekday, month: the
        model's own preprocessing), by full-batch gradient descent

(a) and (b) are real `python -m trainer.task` processes on 127.0.0.1 (TF_CONFIG from
launcher.tfconfig), one intra-op thread each (TRAINER_THREADS=1), trainer defaults unless a
flag below says otherwise; their AUC is the
chief's Final line (Keras AUC, 1000 thresholds), their examples/s is measured over the
training phase from the chief's Train lines after a warm-up (for one process in a second,
longer run: --rate-examples). The baseline's AUC is exact
(ranks). Prints one result line.

    .venv/bin/python bench/taxi_auc.py [--examples 64000] [--batch-size 64] [--data-dir data/taxi]
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import ROOT, cpu, machine, non_negative_int, positive_float, positive_int, require, train_points

try:
    import numpy as np
except ImportError:  # comes with TensorFlow: main() says what is missing
    np = None

from tests.support.trainer_cluster import TrainerCluster  # noqa: E402

WARMUP = 0.2
SETUPS = {"single": {"Chief": 1}, "ps": {"Chief": 1, "PS": 1, "Worker": 4}}
FINAL = re.compile(r"^Final metrics after \d+ steps: loss ([0-9.]+), accuracy ([0-9.]+), auc ([0-9.]+)", re.M)
ONE_HOT = ("payment_type", "company", "hour", "day", "month")


def ensure_data(data_dir: str) -> None:
    """The taxi records in `data_dir`, (re)written when absent or of another label."""
    from trainer.data import DataError
    from trainer.models.taxi import prepare

    try:
        prepare.read_metadata(data_dir)
    except DataError:
        subprocess.run([sys.executable, "-m", "trainer.data", "--dataset", "taxi", "--out", data_dir], cwd=ROOT,
                       check=True, timeout=1800)


def train(name: str, args: argparse.Namespace, workdir: Path, examples: int | None = None) -> dict:
    steps = (examples or args.examples) // args.batch_size  # PS: a global step is one worker's batch
    flags = ["--model", "taxi", "--job-dir", str(workdir / "job"), "--data-dir", args.data_dir,
             "--train-steps", str(steps), "--batch-size", str(args.batch_size),
             "--log-every-steps", str(max(1, steps // 20)), "--eval-every-steps", "0",
             "--checkpoint-every-steps", "0"]
    with TrainerCluster(SETUPS[name], flags, workdir, env={"TRAINER_THREADS": "1"}, name=name) as cluster:
        codes = cluster.wait(args.timeout)
        if set(codes.values()) != {0}:
            raise RuntimeError(f"{name}: exit codes {codes}\n{cluster.tails()}")
        log = cluster.log("chief-0")
    points = [p for p in train_points(log) if p[0] >= steps * WARMUP]
    (step0, seconds0), (step1, seconds1) = points[0], points[-1]
    loss, accuracy, auc = map(float, FINAL.search(log).groups())
    # a run shorter than the Train lines' 0.1 s has no rate (one process's AUC run, often)
    rate = (step1 - step0) * args.batch_size / (seconds1 - seconds0) if seconds1 > seconds0 else float("nan")
    return {"auc": auc, "accuracy": accuracy, "loss": loss, "examples_s": rate}


def rank_auc(labels: np.ndarray, scores: np.ndarray) -> float:
    """Exact AUC: the share of (positive, negative) pairs ranked right, ties half."""
    order = np.argsort(scores, kind="mergesort")
    ranks = np.empty(len(scores))
    sorted_scores = scores[order]
    i = 0
    while i < len(scores):  # average ranks over ties
        j = i
        while j + 1 < len(scores) and sorted_scores[j + 1] == sorted_scores[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2 + 1
        i = j + 1
    positives = labels == 1
    n_pos, n_neg = positives.sum(), (~positives).sum()
    return float((ranks[positives].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def design(data_dir: str, split: str) -> tuple[np.ndarray, np.ndarray]:
    """(features [N, F], labels [N]) of `split` through the model's own preprocessing."""
    import tensorflow as tf

    from trainer import data, models
    from trainer.models.taxi import features

    spec = models.get("taxi")
    source = data.Source(data_dir)
    columns, labels = [], []
    for inputs, label in data.dataset(source, split, 4096, training=False, parse=spec.parser(source)):
        parts = [inputs["numeric"].numpy()]
        parts += [tf.one_hot(inputs[name], features.SIZES[name]).numpy() for name in ONE_HOT]
        columns.append(np.concatenate(parts, axis=1))
        labels.append(label.numpy())
    return np.concatenate(columns).astype(np.float64), np.concatenate(labels)


def logistic_regression(data_dir: str, iterations: int = 2000, rate: float = 0.5, l2: float = 1e-4) -> float:
    x, y = design(data_dir, "train")
    weights, bias = np.zeros(x.shape[1]), 0.0
    for _ in range(iterations):
        p = 1 / (1 + np.exp(-(x @ weights + bias)))
        weights -= rate * (x.T @ (p - y) / len(y) + l2 * weights)
        bias -= rate * float(np.mean(p - y))
    x_eval, y_eval = design(data_dir, "eval")
    return rank_auc(y_eval, x_eval @ weights + bias)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--examples", type=positive_int, default=64_000, help="training examples of each trained setup")
    parser.add_argument("--batch-size", type=positive_int, default=64, help="examples per worker per step")
    parser.add_argument("--data-dir", default=str(ROOT / "data" / "taxi"),
                        help="the taxi records (written there first when absent or of another label)")
    parser.add_argument("--timeout", type=positive_float, default=1800.0, help="seconds per training run")
    parser.add_argument("--rate-examples", type=non_negative_int, default=0,
                        help="examples of a second one-process run that times its examples/s (default: 20x "
                             "--examples): the AUC run of one process trains in about a second, too short to "
                             "time with the Train lines' 0.1 s timestamps")
    args = parser.parse_args()
    if args.examples // args.batch_size < 2:
        parser.error(f"--examples {args.examples}: give at least {2 * args.batch_size} (2 steps at batch "
                     f"{args.batch_size})")
    require("tensorflow")
    ensure_data(args.data_dir)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in SETUPS:
            results[name] = train(name, args, Path(tmp) / name)
            print(f"{name}: {results[name]} ({machine()})", flush=True)
        rate_examples = args.rate_examples or 20 * args.examples
        rate = train("single", args, Path(tmp) / "single-rate", rate_examples)["examples_s"]
        print(f"single, {rate_examples} examples: {rate:.0f} examples/s ({machine()})", flush=True)
    baseline = logistic_regression(args.data_dir)
    single, ps = results["single"], results["ps"]
    print(f"taxi AUC on the eval split (3,000 trips) after {args.examples} examples, batch {args.batch_size}: "
          f"PS 1 ps + 4 workers {ps['auc']:.4f} ({ps['examples_s']:.0f} examples/s), one process "
          f"{single['auc']:.4f} ({rate:.0f} examples/s, timed over {rate_examples} examples), "
          f"difference {ps['auc'] - single['auc']:+.4f}; "
          f"logistic regression baseline {baseline:.4f} (one process {single['auc'] - baseline:+.4f} against it, "
          f"PS {ps['auc'] - baseline:+.4f}); {cpu()}, {machine()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
