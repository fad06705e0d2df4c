"""The MNIST CNN of the Cloud ML Engine samples (`--model mnist-cloudml`), as a Keras 3 model.

conv 5x5x32 + max-pool, conv 5x5x64 + max-pool, dense 1024 + dropout 0.4, dense 10
(3.3M parameters): for comparison with jobs moved from Cloud ML Engine.
"""
from __future__ import annotations

import keras

from trainer.models.mnist import cnn
from trainer.models.mnist.common import (  # noqa: F401 - the model interface
    DATASET, EVAL_SPLIT, RECORDS_HINT, input_spec, loss_and_hits, metrics, parser, prepare_data, request_instances,
    scores, serving)


def build() -> keras.Model:
    return cnn.build("mnist_cloudml", kernel=5, dense=1024)
