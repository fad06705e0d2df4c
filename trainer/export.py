"""SavedModel export to JOB_DIR/export/<unix time>/ for online prediction.

The signatures are the model's own (`serving()` of trainer/models/<name>: MNIST takes
images and keys, the taxi model raw trip features); trainer.predict picks among them by
their inputs, so nothing here knows a model. The exported model is a plain
(non-distributed) copy, so export works the same whether the trained variables live on
ps tasks, are mirrored, or are local.
"""
from __future__ import annotations

import time

import keras
import tensorflow as tf

from trainer import models, paths


def export(model: keras.Model, job_dir: str, name: str = "mnist", source=None) -> str:
    """Save `model` (a plain Keras model of registry model `name`) with its serving
    signatures as a new timestamped SavedModel; returns its path. `source`: the
    data.Source of the training data (models whose serving preprocessing needs its
    vocabulary and statistics)."""
    path = paths.join(paths.exports(job_dir), str(int(time.time())))
    while tf.io.gfile.exists(path):  # two exports within one second
        path = paths.join(paths.exports(job_dir), str(int(path.rsplit("/", 1)[1]) + 1))
    module, signatures = models.get(name).serving(model, source)
    tf.saved_model.save(module, path, signatures=signatures)
    return path
