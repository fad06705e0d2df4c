"""The wide & deep tip classifier (the sample's DNNLinearCombinedClassifier, in Keras 3).

- Wide: a linear model over the sparse ids of features.WIDE (payment type, hashed
  company, bucketised trip miles and seconds, their hashed cross): each id's weight is a
  row of one width-1 embedding table (`wide_weights`, the ids of the features offset into
  one id space), summed per trip; its last row, looked up for every trip, is the bias:
  the same sum as a linear layer over their one-hot encoding, as a variable
  ParameterServerStrategy's partitioner can split by rows.
- Deep: the z-scored numbers next to 8-wide embeddings of features.DEEP, then dense 64,
  dense 32 (relu), dense 1.
- The two logits are added; the sigmoid is applied by the loss and by serving.

Layers are named explicitly (same variable paths, hence checkpoint keys, everywhere).
"""
from __future__ import annotations

import keras
import numpy as np

from trainer.models.taxi import features

EMBEDDING = 8
HIDDEN = (64, 32)


def build() -> keras.Model:
    layers, ops = keras.layers, keras.ops
    inputs = {name: keras.Input((), dtype="int64", name=name) for name in features.SIZES}
    inputs["numeric"] = keras.Input((len(features.FLOATS),), dtype="float32", name="numeric")

    sizes = [features.SIZES[name] for name in features.WIDE]
    offsets = np.cumsum([0] + sizes[:-1]).astype("int64")
    wide_ids = ops.stack([inputs[name] for name in features.WIDE], axis=1) + ops.convert_to_tensor(offsets)
    bias_id = ops.full_like(wide_ids[:, :1], sum(sizes))  # the row after every feature's ids
    wide_table = layers.Embedding(sum(sizes) + 1, 1, embeddings_initializer="zeros", name="wide_weights")
    wide = ops.sum(wide_table(ops.concatenate([wide_ids, bias_id], axis=1)), axis=1)  # [B, 1]

    deep = [inputs["numeric"]]
    for name in features.DEEP:
        deep.append(layers.Embedding(features.SIZES[name], EMBEDDING, name=f"embed_{name}")(inputs[name]))
    hidden = layers.Concatenate(name="deep_inputs")(deep)
    for index, units in enumerate(HIDDEN, 1):
        hidden = layers.Dense(units, activation="relu", name=f"deep_{index}")(hidden)
    deep_logit = layers.Dense(1, name="deep_logit")(hidden)

    logits = layers.Add(name="logits")([wide, deep_logit])
    return keras.Model(inputs, layers.Reshape((), name="logit")(logits), name="taxi")
