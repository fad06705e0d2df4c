"""Test-set evaluation of a plain (non-distributed) model in this process.

The chief copies the distributed weights into a plain model and evaluates that, so
evaluation never competes with training for the workers and never needs the cluster.
"""
from __future__ import annotations

import keras
import tensorflow as tf

from trainer import data


def loss_and_hits(model: keras.Model, images: tf.Tensor, labels: tf.Tensor, training: bool):
    """Per-example cross-entropy, and whether each prediction is right (float 0/1)."""
    logits = model(images, training=training)
    losses = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    hits = tf.cast(tf.equal(tf.argmax(logits, axis=1), labels), tf.float32)
    return losses, hits


class Evaluation:
    """evaluate() -> (mean loss, accuracy) of `model` over the whole test split."""

    def __init__(self, model: keras.Model, source: str | data.Source, batch_size: int, threads: int = 0):
        self.model = model
        self.dataset = data.dataset(source, "test", batch_size, training=False, threads=threads)
        self._batch = tf.function(self._sums, reduce_retracing=True)

    def _sums(self, images, labels):
        losses, hits = loss_and_hits(self.model, images, labels, training=False)
        return tf.reduce_sum(losses), tf.reduce_sum(hits), tf.cast(tf.size(labels), tf.float32)

    def evaluate(self) -> tuple[float, float]:
        loss = hits = count = 0.0
        for images, labels in self.dataset:
            batch_loss, batch_hits, batch_count = self._batch(images, labels)
            loss, hits, count = loss + float(batch_loss), hits + float(batch_hits), count + float(batch_count)
        return loss / count, hits / count
