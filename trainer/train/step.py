"""The training tf.function shared by parameter-server and synchronous training.

`train(iterator, n)` runs `n` steps in an inner loop (several steps per call cuts the
coordinator's dispatch overhead) and returns the mean loss and accuracy of those steps,
then the means of the model's TRAIN_METRICS (the taxi model's batch AUC), if any.
Who counts them in the global step depends on the strategy (see make_train_fn).
"""
from __future__ import annotations

import keras
import tensorflow as tf

from trainer import models, variables


COSINE_FLOOR = 0.01  # cosine decay ends at this fraction of --learning-rate


def warmup_steps(args) -> int:
    """--warmup-steps, at most a quarter of --train-steps."""
    return min(args.warmup_steps, args.train_steps // 4)


def learning_rate(args) -> float | keras.optimizers.schedules.LearningRateSchedule:
    """--learning-rate after a linear warm-up from 0 (--warmup-steps), then constant or
    decayed over the remaining --train-steps (--learning-rate-decay). Warm-up keeps Adam's
    large first steps from throwing asynchronous (parameter-server) training off course.
    The schedule follows the optimizer's own step count, which lives with the variables."""
    warmup = warmup_steps(args)
    decay = args.train_steps - warmup
    alpha = COSINE_FLOOR if args.learning_rate_decay == "cosine" else 1.0  # 1.0: no decay
    if not warmup:
        return keras.optimizers.schedules.CosineDecay(args.learning_rate, decay, alpha=alpha)
    return keras.optimizers.schedules.CosineDecay(0.0, decay, alpha=alpha, warmup_target=args.learning_rate,
                                                  warmup_steps=warmup)


def build_optimizer(model: keras.Model, learning_rate) -> keras.optimizers.Optimizer:
    """Adam built on the model's TensorFlow variables. Call inside strategy.scope(): the
    slots are then created now, next to their variables (on the ps tasks under PS).
    `learning_rate`: a float or a schedule (see learning_rate())."""
    optimizer = keras.optimizers.Adam(learning_rate)
    optimizer.build(variables.sources(model))
    return optimizer


def global_step() -> tf.Variable:
    """The global step: finished steps, counted as make_train_fn describes."""
    return tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step")


def make_train_fn(strategy: tf.distribute.Strategy, state, count_steps: bool = True):
    """`state`: a session.Session (model, optimizer, step) made under `strategy`.

    count_steps: the call adds `n` to the global step (MultiWorkerMirrored and single
    process: every call runs exactly once). Under parameter-server training pass False:
    ClusterCoordinator runs a call again when its worker is lost, also after the call had
    updated the variables, so the coordinator counts the calls it got results for instead
    (session.run); the global step then equals --train-steps exactly."""
    model, optimizer, step = state.model, state.optimizer, state.step
    spec = models.get(state.args.model)
    loss_and_hits, names = spec.loss_and_hits, getattr(spec, "TRAIN_METRICS", ())
    sources = variables.sources(model)

    def replica_step(inputs, labels):
        with tf.GradientTape() as tape:
            losses, hits, logits = loss_and_hits(model, inputs, labels, training=True)
            loss = tf.nn.compute_average_loss(losses)  # / global batch under MWMS
        grads = tape.gradient(loss, sources)
        optimizer.apply_gradients(zip(grads, sources))
        extra = tf.stack(spec.batch_metrics(labels, logits)) if names else tf.zeros([0])
        return loss, tf.reduce_mean(hits), extra

    @tf.function
    def train(iterator, n):
        loss_sum = tf.constant(0.0)
        accuracy_sum = tf.constant(0.0)
        extra_sum = tf.zeros([len(names)])
        for _ in tf.range(n):
            inputs, labels = next(iterator)
            loss, accuracy, extra = strategy.run(replica_step, args=(inputs, labels))
            loss_sum += strategy.reduce(tf.distribute.ReduceOp.SUM, loss, axis=None)
            accuracy_sum += strategy.reduce(tf.distribute.ReduceOp.MEAN, accuracy, axis=None)
            extra_sum += strategy.reduce(tf.distribute.ReduceOp.MEAN, extra, axis=None)
        if count_steps:
            step.assign_add(tf.cast(n, tf.int64))
        count = tf.cast(n, tf.float32)
        if names:
            return (loss_sum / count, accuracy_sum / count, *tf.unstack(extra_sum / count, num=len(names)))
        return loss_sum / count, accuracy_sum / count

    return train
