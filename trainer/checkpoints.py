"""Checkpoints in JOB_DIR/checkpoints, keyed by variable path (see variables.named).

The checkpoint holds `model` (the weights), `optimizer` (its variables) and `step` (the
global step). A restart restores the latest one and continues from its step.
"""
from __future__ import annotations

import re
import shutil
import tempfile

import keras
import tensorflow as tf

from trainer import paths, variables

MAX_TO_KEEP = 5
_STEP = re.compile(r"ckpt-(\d+)$")


def checkpoint(model: keras.Model, optimizer: keras.optimizers.Optimizer | None = None,
               step: tf.Variable | None = None) -> tf.train.Checkpoint:
    parts = {"model": variables.named(model.weights)}
    if optimizer is not None:
        parts["optimizer"] = variables.named(optimizer.variables)
    if step is not None:
        parts["step"] = step
    return tf.train.Checkpoint(**parts)


def step_of(path: str) -> int:
    """The global step a checkpoint was written at (its number)."""
    match = _STEP.search(path)
    return int(match[1]) if match else 0


class Checkpointer:
    """Saves and restores the training state. `writer=False` (MWMS non-chief workers) still
    takes part in saving, as MultiWorkerMirroredStrategy requires, but into a temp dir."""

    def __init__(self, job_dir: str, ckpt: tf.train.Checkpoint, writer: bool = True):
        self.directory = paths.checkpoints(job_dir)
        self.ckpt = ckpt
        self.writer = writer
        self.manager = tf.train.CheckpointManager(ckpt, self.directory, max_to_keep=MAX_TO_KEEP)

    def restore(self) -> str | None:
        """Restore the latest checkpoint; returns its path (None: fresh start)."""
        latest = self.manager.latest_checkpoint
        if latest:
            self.ckpt.restore(latest).expect_partial()
        return latest

    def save(self, step: int) -> str:
        if self.writer:
            return self.manager.save(checkpoint_number=step)
        scratch = tempfile.mkdtemp(prefix="ckpt-")
        try:
            return tf.train.CheckpointManager(self.ckpt, scratch, max_to_keep=1).save(checkpoint_number=step)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
