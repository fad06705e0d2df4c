"""The training tf.function shared by parameter-server and synchronous training.

`train(iterator, n)` runs `n` steps in an inner loop (several steps per call cuts the
coordinator's dispatch overhead), adds `n` to the global step and returns the mean loss
and accuracy of those steps.
"""
from __future__ import annotations

import keras
import tensorflow as tf

from trainer import variables
from trainer.evaluate import loss_and_hits


def build_optimizer(model: keras.Model, learning_rate: float) -> keras.optimizers.Optimizer:
    """Adam built on the model's TensorFlow variables. Call inside strategy.scope(): the
    slots are then created now, next to their variables (on the ps tasks under PS)."""
    optimizer = keras.optimizers.Adam(learning_rate)
    optimizer.build(variables.sources(model))
    return optimizer


def global_step() -> tf.Variable:
    """The global step, counted once per finished step by whoever ran it."""
    return tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step")


def make_train_fn(strategy: tf.distribute.Strategy, state):
    """`state`: a session.Session (model, optimizer, step) made under `strategy`."""
    model, optimizer, step = state.model, state.optimizer, state.step
    sources = variables.sources(model)

    def replica_step(images, labels):
        with tf.GradientTape() as tape:
            losses, hits = loss_and_hits(model, images, labels, training=True)
            loss = tf.nn.compute_average_loss(losses)  # / global batch under MWMS
        grads = tape.gradient(loss, sources)
        optimizer.apply_gradients(zip(grads, sources))
        return loss, tf.reduce_mean(hits)

    @tf.function
    def train(iterator, n):
        loss_sum = tf.constant(0.0)
        accuracy_sum = tf.constant(0.0)
        for _ in tf.range(n):
            images, labels = next(iterator)
            loss, accuracy = strategy.run(replica_step, args=(images, labels))
            loss_sum += strategy.reduce(tf.distribute.ReduceOp.SUM, loss, axis=None)
            accuracy_sum += strategy.reduce(tf.distribute.ReduceOp.MEAN, accuracy, axis=None)
        step.assign_add(tf.cast(n, tf.int64))
        count = tf.cast(n, tf.float32)
        return loss_sum / count, accuracy_sum / count

    return train
