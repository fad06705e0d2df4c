"""SavedModel export to JOB_DIR/export/<unix time>/ for online prediction.

The signatures are the model's own (`serving()` of trainer/models/<name>: MNIST takes
images and keys, the taxi model raw trip features); trainer.predict picks among them by
their inputs, so nothing here knows a model. The exported model is a plain
(non-distributed) copy, so export works the same whether the trained variables live on
ps tasks, are mirrored, or are local.

A numeric version dir appears only complete. TF Serving and KServe watch the export base
and load its highest numbered dir, so the SavedModel is written to `export/temp-<version>/`
(not numeric: no version to TF Serving, trainer.predict or trainer.serve, as TF Estimator's
exporter did) and renamed to `export/<version>/` once written:
- a local job dir: one rename(2) of the directory, atomic;
- gs:// (any URL): TensorFlow's GCS filesystem renames a directory object by object (copy,
  then delete) in listing order, saved_model.pb before variables/ (a hierarchical-namespace
  bucket renames the folder whole). Here each file is renamed by itself instead, and
  saved_model.pb last, so the version holds a saved_model.pb only when everything else is
  there: the rule of trainer.predict.saved_versions (a dir without one is no version yet).
A failed save or rename (an error, Ctrl-C) removes the temp dir and, when the files were
being moved one by one, the incomplete version dir (best effort). A process that dies
without unwinding (SIGKILL; SIGTERM, as trainer.task leaves through os._exit) leaves its
temp dir, ignored by name by everything that loads, and removed by the next export to the
same job dir (its chief is the only exporter).
"""
from __future__ import annotations

import re
import time

import keras
import tensorflow as tf

from trainer import models, paths

TEMP_PREFIX = "temp-"
SAVED_MODEL = "saved_model.pb"
_TEMP = re.compile(rf"{TEMP_PREFIX}\d+")


def export(model: keras.Model, job_dir: str, name: str = models.DEFAULT, source=None) -> str:
    """Save `model` (a plain Keras model of registry model `name`) with its serving
    signatures as a new timestamped SavedModel; returns its path. `source`: the
    data.Source of the training data (models whose serving preprocessing needs its
    vocabulary and statistics)."""
    base = paths.exports(job_dir)
    remove_leftovers(base)
    version = int(time.time())
    while tf.io.gfile.exists(paths.join(base, str(version))):  # two exports within one second
        version += 1
    path, temp = paths.join(base, str(version)), paths.join(base, f"{TEMP_PREFIX}{version}")
    module, signatures = models.get(name).serving(model, source)
    try:
        tf.saved_model.save(module, temp, signatures=signatures)
    except BaseException:
        _remove(temp)
        raise
    publish(temp, path)
    return path


def remove_leftovers(base: str) -> None:
    """Remove the temp dirs (temp-<digits>) of exports that died before their rename."""
    if not tf.io.gfile.isdir(base):
        return
    for name in tf.io.gfile.listdir(base):
        if _TEMP.fullmatch(name.strip("/")):
            _remove(paths.join(base, name.strip("/")))


def atomic_rename(path: str) -> bool:
    """Whether a directory at `path` is renamed in one step: a local path (rename(2)), not a
    URL such as gs:// (TensorFlow's tf.io.gfile.has_atomic_move says True for gs:// too)."""
    return "://" not in path or path.startswith("file://")


def publish(temp: str, path: str) -> None:
    """Rename the written SavedModel `temp` to its version dir `path` (see the module's doc)."""
    if atomic_rename(path):
        try:
            tf.io.gfile.rename(temp, path)  # overwrite=False: an existing `path` is an error
        except BaseException:
            _remove(temp)
            raise
        return
    moves, prefix = [], temp.rstrip("/")
    for top, _, files in tf.io.gfile.walk(prefix):
        below = top.rstrip("/")[len(prefix):].strip("/")
        target = paths.join(path, below) if below else path
        moves += [(paths.join(top.rstrip("/"), name), paths.join(target, name)) for name in files]
    moves.sort(key=lambda move: move[1] == paths.join(path, SAVED_MODEL))  # stable: saved_model.pb last
    if tf.io.gfile.exists(path):
        _remove(temp)
        raise tf.errors.AlreadyExistsError(None, None, f"{path} exists; the export stays unpublished")
    try:
        for source, target in moves:
            tf.io.gfile.makedirs(target.rsplit("/", 1)[0])
            tf.io.gfile.rename(source, target)
    except BaseException:
        _remove(path)
        _remove(temp)
        raise
    _remove(temp)  # its directory markers


def _remove(path: str) -> None:
    """Best effort: the error that led here is the one to report."""
    try:
        if tf.io.gfile.exists(path):
            tf.io.gfile.rmtree(path)
    except Exception:  # noqa: BLE001
        pass
