"""SavedModel export to JOB_DIR/export/<unix time>/ for online prediction.

Signatures (a SavedModel signature cannot have optional inputs, so `key` being optional
means two signatures over the same model):

- `serving_default`: `image` float32 in [0, 1], shape [N,784] or [N,28,28] (or [N,28,28,1])
  -> `key` int64 [N] (the row index), `classes` int64 [N], `probabilities` float32 [N,10]
- `keyed`: `image` as above and `key` int64 [N], passed through to the `key` output.

The exported model is a plain (non-distributed) copy, so export works the same whether the
trained variables live on ps tasks, are mirrored, or are local.
"""
from __future__ import annotations

import time

import keras
import tensorflow as tf

from trainer import paths

IMAGE = tf.TensorSpec(shape=None, dtype=tf.float32, name="image")
KEY = tf.TensorSpec(shape=[None], dtype=tf.int64, name="key")
KEYED = "keyed"


class Serving(tf.Module):
    def __init__(self, model: keras.Model):
        super().__init__()
        self.model = model

    def _predict(self, image: tf.Tensor, key: tf.Tensor) -> dict[str, tf.Tensor]:
        images = tf.reshape(image, [-1, 28, 28, 1])
        probabilities = tf.nn.softmax(self.model(images, training=False), axis=-1)
        return {"key": key, "classes": tf.argmax(probabilities, axis=1), "probabilities": probabilities}

    @tf.function(input_signature=[IMAGE])
    def serve(self, image):
        rows = tf.shape(tf.reshape(image, [-1, 784]), out_type=tf.int64)[0]
        return self._predict(image, tf.range(rows))

    @tf.function(input_signature=[IMAGE, KEY])
    def serve_keyed(self, image, key):
        return self._predict(image, key)


def export(model: keras.Model, job_dir: str) -> str:
    """Save `model` (a plain Keras model) as a new timestamped SavedModel; returns its path."""
    path = paths.join(paths.exports(job_dir), str(int(time.time())))
    while tf.io.gfile.exists(path):  # two exports within one second
        path = paths.join(paths.exports(job_dir), str(int(path.rsplit("/", 1)[1]) + 1))
    module = Serving(model)
    tf.saved_model.save(module, path, signatures={"serving_default": module.serve, KEYED: module.serve_keyed})
    return path
