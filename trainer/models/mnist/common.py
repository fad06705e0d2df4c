"""What both MNIST models share besides the CNN: parsing the image records, the softmax
loss, serving signatures, data preparation (see trainer/models/__init__.py).

Records: tf.train.Example with `image` (784 raw uint8 bytes; `--image-feature` names
another feature) and `label` (int64), written by `python -m trainer.data --out DIR`.

Signatures (a SavedModel signature cannot have optional inputs, so `key` being optional
means two signatures over the same model):

- `serving_default`: `image` float32 in [0, 1], shape [N,784] or [N,28,28] (or [N,28,28,1]),
  and `key` int64 [N] -> `key` (passed through), `classes` int64 [N], `probabilities`
  float32 [N,10]. The request lines of the Cloud ML samples (`{"image": [...], "key": 7}`)
  go to it as they are, through TF Serving or KServe's TensorFlow runtime.
- `unkeyed` (UNKEYED): `image` alone -> the same outputs, `key` the row index.
"""
from __future__ import annotations

import keras
import tensorflow as tf

DATASET = "MNIST"
EVAL_SPLIT = "test"
FEATURES = {"image": tf.io.FixedLenFeature([], tf.string),
            "label": tf.io.FixedLenFeature([], tf.int64)}
IMAGE = tf.TensorSpec(shape=None, dtype=tf.float32, name="image")
KEY = tf.TensorSpec(shape=[None], dtype=tf.int64, name="key")
UNKEYED = "unkeyed"
RECORDS_HINT = ("pass --image-feature NAME, the feature holding the image's 784 bytes (image_raw in the "
                "TensorFlow MNIST tutorials' records)")


def parse(records: tf.Tensor, image_feature: str = "image") -> tuple[tf.Tensor, tf.Tensor]:
    """A batch of serialized Examples -> (float images [B,28,28,1] in [0,1], int64 labels [B])."""
    parsed = tf.io.parse_example(records, {image_feature: FEATURES["image"], "label": FEATURES["label"]})
    images = tf.io.decode_raw(parsed[image_feature], tf.uint8)
    images = tf.reshape(tf.cast(images, tf.float32) / 255.0, [-1, 28, 28, 1])
    return images, parsed["label"]


def parser(source):
    feature = getattr(source, "image_feature", "image")
    return lambda records: parse(records, feature)


def loss_and_hits(model: keras.Model, images: tf.Tensor, labels: tf.Tensor, training: bool):
    """Per-example cross-entropy, whether each prediction is right (float 0/1), the logits."""
    logits = model(images, training=training)
    losses = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    hits = tf.cast(tf.equal(tf.argmax(logits, axis=1), labels), tf.float32)
    return losses, hits, logits


def metrics() -> dict:
    return {}


def scores(logits: tf.Tensor) -> tf.Tensor:
    return tf.nn.softmax(logits, axis=-1)


def input_spec():
    return tf.TensorSpec([None, 28, 28, 1], tf.float32)


class Serving(tf.Module):
    def __init__(self, model: keras.Model):
        super().__init__()
        self.model = model

    def _predict(self, image: tf.Tensor, key: tf.Tensor) -> dict[str, tf.Tensor]:
        images = tf.reshape(image, [-1, 28, 28, 1])
        probabilities = tf.nn.softmax(self.model(images, training=False), axis=-1)
        return {"key": key, "classes": tf.argmax(probabilities, axis=1), "probabilities": probabilities}

    @tf.function(input_signature=[IMAGE, KEY])
    def serve(self, image, key):
        return self._predict(image, key)

    @tf.function(input_signature=[IMAGE])
    def serve_unkeyed(self, image):
        rows = tf.shape(tf.reshape(image, [-1, 784]), out_type=tf.int64)[0]
        return self._predict(image, tf.range(rows))


def serving(model: keras.Model, source=None):
    module = Serving(model)
    return module, {"serving_default": module.serve, UNKEYED: module.serve_unkeyed}


def request_instances(data_dir: str, count: int, keys: bool) -> tuple[list[dict], list[int]]:
    """(json instances, true labels) of the first `count` test images (trainer.make_request)."""
    from trainer import data

    images, labels = next(iter(data.dataset(data_dir, EVAL_SPLIT, count, training=False)))
    rows = []
    for index, image in enumerate(images.numpy().reshape(-1, 784)):
        row = {"image": [round(float(pixel), 4) for pixel in image]}
        if keys:
            row["key"] = index
        rows.append(row)
    return rows, [int(label) for label in labels.numpy()]


def prepare_data(out: str) -> dict[str, int]:
    from trainer import data

    return data.write(out)
