"""The default MNIST CNN, sized for fast time to accuracy on CPUs.

Inputs standardised with MNIST's mean and standard deviation, conv 3x3x32 + max-pool,
conv 3x3x64 + max-pool, dense 256 + dropout 0.4, dense 10 (825k parameters). Against the
Cloud ML Engine sample's CNN (`--model mnist-cloudml`: 5x5 kernels, dense 1024, 3.3M
parameters) it trains 2.5x more examples per second on a CPU and needs about as many
examples to reach 99% test accuracy (bench/time_to_accuracy.py).
"""
from __future__ import annotations

import keras

from trainer.models.mnist import cnn
from trainer.models.mnist.common import (  # noqa: F401 - the model interface
    DATASET, EVAL_SPLIT, RECORDS_HINT, input_spec, loss_and_hits, metrics, parser, prepare_data, request_instances,
    scores, serving)

PIXEL_MEAN, PIXEL_STD = 0.1307, 0.3081  # of MNIST's training images in [0, 1]


def build() -> keras.Model:
    standardize = keras.layers.Rescaling(1 / PIXEL_STD, offset=-PIXEL_MEAN / PIXEL_STD, name="standardize")
    return cnn.build("mnist", kernel=3, dense=256, inputs=(standardize,))
