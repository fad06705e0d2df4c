"""The two-block MNIST CNN both registered models are made of.

conv KxKx32 + max-pool, conv KxKx64 + max-pool, dense N + dropout 0.4, dense 10, after
optional input layers. Layers and the model are named explicitly so that variable paths
(and with them the checkpoint keys) are the same in every process and for every copy of
the model. The model outputs logits; the softmax is applied by the loss and by the
serving signature.
"""
from __future__ import annotations

import keras

IMAGE_SHAPE = (28, 28, 1)
CLASSES = 10


def build(name: str, kernel: int, dense: int, inputs: tuple[keras.layers.Layer, ...] = ()) -> keras.Model:
    layers = keras.layers
    return keras.Sequential([
        keras.Input(IMAGE_SHAPE, name="image"),
        *inputs,
        layers.Conv2D(32, kernel, padding="same", activation="relu", name="conv1"),
        layers.MaxPooling2D(2, name="pool1"),
        layers.Conv2D(64, kernel, padding="same", activation="relu", name="conv2"),
        layers.MaxPooling2D(2, name="pool2"),
        layers.Flatten(name="flatten"),
        layers.Dense(dense, activation="relu", name="dense"),
        layers.Dropout(0.4, name="dropout"),
        layers.Dense(CLASSES, name="logits"),
    ], name=name)
