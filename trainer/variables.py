"""Keras 3 variables under tf.distribute, seen through the TensorFlow variables inside them.

Under ParameterServerStrategy with a variable partitioner, a Keras 3 variable may wrap a
`ShardedVariable` (its parts on different ps tasks). Keras 3 cannot take gradients of,
update, or checkpoint such a variable itself (no `.handle`, no colocation, no `.device`),
so the trainer works on the TensorFlow variables underneath:

- `sources(model)`: the variables to differentiate and update (each shard separately);
  the optimizer is built on these, so its slots sit next to each shard on its ps task;
- `named(variables)`: {stable name: tf variable} for tf.train.Checkpoint. A
  ShardedVariable saves as one full tensor, so a checkpoint written by a sharded job
  restores into a plain model (evaluator, export) or a job with another ps count;
- `read(variable)`: the full value as one tensor, wherever it lives.
"""
from __future__ import annotations

import keras
import tensorflow as tf
from tensorflow.python.distribute.sharded_variable import ShardedVariable


def underlying(variable: keras.Variable | tf.Variable):
    """The TensorFlow variable (possibly a ShardedVariable) behind a Keras variable."""
    return variable.value if isinstance(variable, keras.Variable) else variable


def parts(variable) -> list:
    value = underlying(variable)
    return list(value.variables) if isinstance(value, ShardedVariable) else [value]


def sources(model: keras.Model) -> list:
    """Trainable TensorFlow variables of the model, shards listed one by one."""
    return [part for variable in model.trainable_variables for part in parts(variable)]


def read(variable) -> tf.Tensor:
    return tf.convert_to_tensor(underlying(variable))


def named(variables) -> dict:
    """{path with '/' -> '.': tf variable}, the checkpoint key of each variable."""
    return {variable.path.replace("/", "."): underlying(variable) for variable in variables}


def devices(variable) -> list[str]:
    return [part.device for part in parts(variable)]


def placement(model: keras.Model) -> list[str]:
    """One line per model weight: `Variable PATH SHAPE on DEVICE[, DEVICE...]`."""
    return [f"Variable {v.path} {tuple(v.shape)} on {', '.join(devices(v))}" for v in model.weights]


def copy(source: keras.Model, target: keras.Model) -> None:
    """Assign every weight of `source` (distributed or not) to the plain model `target`."""
    for src, dst in zip(source.weights, target.weights, strict=True):
        dst.assign(read(src))
