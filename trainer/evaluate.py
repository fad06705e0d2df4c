"""Evaluation of a plain (non-distributed) model in this process, over the model's
evaluation split.

The chief copies the distributed weights into a plain model and evaluates that, so
evaluation never competes with training for the workers and never needs the cluster.
"""
from __future__ import annotations

import keras
import tensorflow as tf

from trainer import data, models


class Evaluation:
    """evaluate() -> {"loss", "accuracy", and the model's metrics() (e.g. "auc")} of `model`
    over the whole evaluation split. `name`: the model's registry name."""

    def __init__(self, model: keras.Model, source: str | data.Source, batch_size: int, threads: int = 0,
                 name: str = models.DEFAULT):
        self.model = model
        self.spec = models.get(name)
        self.metrics = self.spec.metrics()
        src = source if isinstance(source, data.Source) else data.Source(source)
        self.dataset = data.dataset(src, self.spec.EVAL_SPLIT, batch_size, training=False, threads=threads,
                                    parse=self.spec.parser(src))
        self._batch = tf.function(self._sums, reduce_retracing=True)

    def _sums(self, inputs, labels):
        losses, hits, logits = self.spec.loss_and_hits(self.model, inputs, labels, training=False)
        if self.metrics:
            scores = self.spec.scores(logits)
            for metric in self.metrics.values():
                metric.update_state(labels, scores)
        return tf.reduce_sum(losses), tf.reduce_sum(hits), tf.cast(tf.size(labels), tf.float32)

    def evaluate(self) -> dict[str, float]:
        for metric in self.metrics.values():
            metric.reset_state()
        loss = hits = count = 0.0
        for inputs, labels in self.dataset:
            batch_loss, batch_hits, batch_count = self._batch(inputs, labels)
            loss, hits, count = loss + float(batch_loss), hits + float(batch_hits), count + float(batch_count)
        return {"loss": loss / count, "accuracy": hits / count,
                **{name: float(metric.result()) for name, metric in self.metrics.items()}}
