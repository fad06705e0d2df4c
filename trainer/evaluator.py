"""The side-car evaluator: evaluates each new checkpoint in JOB_DIR/checkpoints.

It is not part of the coordinator's cluster (training-operator leaves it out of
TF_CONFIG's cluster; a coordinator that sees it hangs). It restores every new checkpoint
into a plain model, prints `Eval step N: ...`, writes JOB_DIR/evaluator/ events, and exits
when the chief's done marker appears (after evaluating the last checkpoint) or when the
chief is gone for good (lifecycle.py).
"""
from __future__ import annotations

import argparse
import time

import tensorflow as tf

from trainer import checkpoints, lifecycle, models, paths, progress
from trainer.cluster import Cluster
from trainer.evaluate import Evaluation


class SideCar:
    def __init__(self, args: argparse.Namespace):
        model = models.build(args.model)
        self.directory = paths.checkpoints(args.job_dir)
        self.ckpt = checkpoints.checkpoint(model)
        self.evaluation = Evaluation(model, args.data_dir, args.eval_batch_size, args.threads)
        self.scalars = progress.Scalars(args.job_dir, "evaluator")
        self.last: str | None = None

    def evaluate_latest(self) -> bool:
        """Evaluate the newest checkpoint if not done yet; False if there was none new."""
        latest = tf.train.latest_checkpoint(self.directory)
        if latest is None or latest == self.last:
            return False
        self.last = latest
        try:
            self.ckpt.restore(latest).expect_partial()
        except (tf.errors.NotFoundError, tf.errors.DataLossError) as error:
            print(f"Skipped {latest}: {type(error).__name__} (deleted or being written)")
            return True
        step = checkpoints.step_of(latest)
        loss, accuracy = self.evaluation.evaluate()
        print(progress.eval_line(step, loss, accuracy))
        self.scalars.write(step, loss=loss, accuracy=accuracy)
        return True


def run(args: argparse.Namespace, cluster: Cluster) -> int:
    watch = lifecycle.Watch(args.job_dir, cluster.chief_address, args.poll_seconds, args.orphan_seconds)
    sidecar = SideCar(args)
    print(f"Evaluator watching {sidecar.directory}")
    while True:
        if sidecar.evaluate_latest():
            continue
        outcome = watch.check()
        if outcome is not None:
            sidecar.evaluate_latest()
            print(lifecycle.message(outcome, watch))
            return lifecycle.EXIT_CODES[outcome]
        time.sleep(args.poll_seconds)
