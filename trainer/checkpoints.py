"""Checkpoints in JOB_DIR/checkpoints, keyed by variable path (see variables.named).

The checkpoint holds `model` (the weights), `optimizer` (its state) and `step` (the
global step). A restart restores the latest one and continues from its step.

Every key is independent of how the variables are laid out on the ps tasks, so a
checkpoint restores into any number of ps (or none: evaluator, export, one process):

    model/mnist.dense.kernel                     the full weight (a ShardedVariable saves whole)
    optimizer/mnist.dense.kernel.momentum        Adam's slots of that weight, whole: the slot
    optimizer/mnist.dense.kernel.velocity        of each shard is one slice of it
    optimizer/iteration, learning_rate           the optimizer's own variables (by name)
    step                                         the global step

Before restoring, the checkpoint's variable list is compared with what this process
expects (restore_check): a checkpoint of another model, or from before this layout, is
refused with one line (MismatchError) instead of silently restoring part of it.
"""
from __future__ import annotations

import logging
import re
import shutil
import tempfile

import keras
import tensorflow as tf
from tensorflow.python.distribute.sharded_variable import ShardedVariable

from trainer import paths, variables

MAX_TO_KEEP = 5
_STEP = re.compile(r"ckpt-(\d+)$")
SLOTS = {"_momentums": "momentum", "_velocities": "velocity", "_velocity_hats": "velocity_hat"}
VALUE = ".ATTRIBUTES/VARIABLE_VALUE"


class _SaverRetracing(logging.Filter):
    """Drops TensorFlow's `5 out of the last 5 calls to <function MultiDeviceSaver.save.<locals>.
    tf_function_save ...> triggered tf.function retracing` warning, twice in a chief's log
    under PS: with the variables on other tasks than the chief's, TensorFlow's saver makes a
    new tf.function on each save and its retracing detector counts them as one. Nothing the
    user can change; other retracing warnings pass."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "MultiDeviceSaver.save.<locals>.tf_function_save" not in record.getMessage()


def quiet_saver_retracing() -> None:
    """Install _SaverRetracing on TensorFlow's logger, once."""
    logger = logging.getLogger("tensorflow")
    if not any(isinstance(known, _SaverRetracing) for known in logger.filters):
        logger.addFilter(_SaverRetracing())


class MismatchError(ValueError):
    """The checkpoint does not hold the variables this job expects; one line."""


def slot_variables(model: keras.Model, optimizer: keras.optimizers.Optimizer) -> dict[str, tf.Variable]:
    """{`<weight path>.<slot>`: slot}, one entry per model weight and slot kind. The
    optimizer is built on the shards of each weight (variables.sources), so a weight split
    across ps tasks has one slot per shard: these are saved as one ShardedVariable, i.e.
    as the whole tensor, the same key and shape whatever the number of ps."""
    sources = variables.sources(model)
    named: dict[str, tf.Variable] = {}
    for attribute, kind in SLOTS.items():
        slots = [variables.underlying(slot) for slot in getattr(optimizer, attribute, None) or []]
        if not slots:
            continue
        if len(slots) != len(sources):
            raise RuntimeError(f"optimizer {attribute}: {len(slots)} slots for {len(sources)} variables")
        start = 0
        for weight in model.trainable_variables:
            count = len(variables.parts(weight))
            parts = slots[start:start + count]
            start += count
            key = f"{weight.path.replace('/', '.')}.{kind}"
            named[key] = parts[0] if count == 1 else ShardedVariable(parts, name=key)
    return named


def optimizer_variables(model: keras.Model, optimizer: keras.optimizers.Optimizer) -> dict[str, tf.Variable]:
    """The optimizer's state, keyed independently of the ps layout (see the module doc)."""
    slots = slot_variables(model, optimizer)
    slot_ids = {id(variables.underlying(slot)) for attribute in SLOTS
                for slot in getattr(optimizer, attribute, None) or []}
    own = {v.path.rsplit("/", 1)[-1]: variables.underlying(v) for v in optimizer.variables
           if id(variables.underlying(v)) not in slot_ids}  # not its path: a second Adam is adam_1/
    return {**own, **slots}


def groups(model: keras.Model, optimizer: keras.optimizers.Optimizer | None = None,
           step: tf.Variable | None = None) -> dict:
    """{"model": {...}, "optimizer": {...}, "step": step}: what a checkpoint holds."""
    parts: dict = {"model": variables.named(model.weights)}
    if optimizer is not None:
        parts["optimizer"] = optimizer_variables(model, optimizer)
    if step is not None:
        parts["step"] = step
    return parts


def checkpoint(model: keras.Model, optimizer: keras.optimizers.Optimizer | None = None,
               step: tf.Variable | None = None) -> tf.train.Checkpoint:
    return tf.train.Checkpoint(**groups(model, optimizer, step))


def _escape(name: str) -> str:
    """A dict key as tf.train.Checkpoint writes it in a variable's key ('.' -> '..', '/' -> './')."""
    return name.replace(".", "..").replace("/", "./")


def entries(parts: dict) -> dict[str, tf.Variable]:
    """{checkpoint key: variable} of every variable in `parts` (see groups())."""
    keys = {}
    for group, value in parts.items():
        if isinstance(value, dict):
            for name, variable in value.items():
                keys[f"{group}/{_escape(name)}/{VALUE}"] = variable
        else:
            keys[f"{group}/{VALUE}"] = value
    return keys


def expected(parts: dict) -> dict[str, tuple[int, ...]]:
    """{checkpoint key: full shape} of every variable in `parts`."""
    return {key: tuple(variable.shape) for key, variable in entries(parts).items()}


def _listing(names: list[str], limit: int = 3) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def readable(key: str) -> str:
    return key[:-len(VALUE) - 1].replace("./", "/").replace("..", ".")


def mismatch(path: str, parts: dict) -> str | None:
    """What differs between the checkpoint at `path` and `parts`, or None when every
    variable of `parts` is in it with its shape and the checkpoint holds nothing else in
    the groups of `parts` (a model checkpoint restored for evaluation may hold more groups)."""
    want = expected(parts)
    have = {key: tuple(shape) for key, shape in tf.train.list_variables(path)
            if key.split("/", 1)[0] in parts}
    missing = sorted(readable(k) for k in want.keys() - have.keys())
    extra = sorted(readable(k) for k in have.keys() - want.keys())
    shapes = sorted(f"{readable(k)} {list(have[k])} (expected {list(want[k])})"
                    for k in want.keys() & have.keys() if have[k] != want[k])
    problems = []
    if missing:
        problems.append(f"it lacks {_listing(missing)}")
    if extra:
        problems.append(f"it holds {_listing(extra)} that this job does not have")
    if shapes:
        problems.append(f"shapes differ: {_listing(shapes)}")
    return "; ".join(problems) or None


def restore_check(path: str, parts: dict, job_dir: str, model: str) -> None:
    """Raise MismatchError (one line naming the job dir) unless `path` fits `parts`."""
    problem = mismatch(path, parts)
    if problem:
        raise MismatchError(
            f"--job-dir {job_dir}: checkpoint {path.rsplit('/', 1)[-1]} does not match --model {model} "
            f"({problem}); use a new --job-dir, or the --model the checkpoint was trained with")


def step_of(path: str) -> int:
    """The global step a checkpoint was written at (its number)."""
    match = _STEP.search(path)
    return int(match[1]) if match else 0


class Checkpointer:
    """Saves and restores the training state. `writer=False` (MWMS non-chief workers) still
    takes part in saving, as MultiWorkerMirroredStrategy requires, but into a temp dir."""

    def __init__(self, job_dir: str, parts: dict, model_name: str, writer: bool = True):
        self.job_dir = job_dir
        self.directory = paths.checkpoints(job_dir)
        self.parts = parts
        self.model_name = model_name
        self.ckpt = tf.train.Checkpoint(**parts)
        self.writer = writer
        self.manager = tf.train.CheckpointManager(self.ckpt, self.directory, max_to_keep=MAX_TO_KEEP)
        quiet_saver_retracing()

    def restore(self) -> str | None:
        """Restore the latest checkpoint, every variable of it (MismatchError if it does not
        fit); returns its path (None: fresh start)."""
        latest = self.manager.latest_checkpoint
        if latest:
            restore_check(latest, self.parts, self.job_dir, self.model_name)
            self.ckpt.restore(latest).expect_partial()  # save_counter: the manager's own
        return latest

    def save(self, step: int) -> str:
        if self.writer:
            return self.manager.save(checkpoint_number=step)
        scratch = tempfile.mkdtemp(prefix="ckpt-")
        try:
            return tf.train.CheckpointManager(self.ckpt, scratch, max_to_keep=1).save(checkpoint_number=step)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
