"""Model registry: `--model NAME` picks a builder. Importing this package is cheap (no
TensorFlow); the model module is imported when a model is built."""
from __future__ import annotations

import importlib

MODELS = {  # name -> module with build() -> keras.Model
    "mnist": "trainer.models.mnist",
    "mnist-cloudml": "trainer.models.mnist_cloudml",
}


def build(name: str):
    return importlib.import_module(MODELS[name]).build()
