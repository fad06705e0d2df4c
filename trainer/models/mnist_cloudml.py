"""The MNIST CNN of the Cloud ML Engine samples (`--model mnist-cloudml`), as a Keras 3 model.

conv 5x5x32 + max-pool, conv 5x5x64 + max-pool, dense 1024 + dropout 0.4, dense 10
(3.3M parameters): for comparison with jobs moved from Cloud ML Engine. Named like
trainer.models.mnist so that variable paths are stable across processes.
"""
from __future__ import annotations

import keras

from trainer.models.mnist import CLASSES, IMAGE_SHAPE


def build() -> keras.Model:
    layers = keras.layers
    return keras.Sequential([
        keras.Input(IMAGE_SHAPE, name="image"),
        layers.Conv2D(32, 5, padding="same", activation="relu", name="conv1"),
        layers.MaxPooling2D(2, name="pool1"),
        layers.Conv2D(64, 5, padding="same", activation="relu", name="conv2"),
        layers.MaxPooling2D(2, name="pool2"),
        layers.Flatten(name="flatten"),
        layers.Dense(1024, activation="relu", name="dense"),
        layers.Dropout(0.4, name="dropout"),
        layers.Dense(CLASSES, name="logits"),
    ], name="mnist_cloudml")
