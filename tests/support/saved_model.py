"""Accuracy of an exported SavedModel (trainer/export.py signatures) on the real MNIST
test set, computed in a separate Python process with TensorFlow (the test process stays
free of it): the `serving_default` classes against the labels of every test record."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.tools import ROOT

TIMEOUT_S = 300.0
_SCRIPT = """
import sys
import tensorflow as tf
from trainer import data
serve = tf.saved_model.load(sys.argv[1]).signatures["serving_default"]
hits = total = 0
for images, labels in data.dataset(sys.argv[2], "test", 1000, training=False):
    classes = serve(image=images, key=tf.range(tf.shape(labels, out_type=tf.int64)[0]))["classes"]
    hits += int(tf.reduce_sum(tf.cast(tf.equal(classes, labels), tf.int64)))
    total += int(tf.shape(labels)[0])
print(total, hits / total)
"""


def export_accuracy(export_dir: Path, data_dir: Path) -> tuple[int, float]:
    """(test examples, accuracy) of the SavedModel at `export_dir`."""
    done = subprocess.run([sys.executable, "-c", _SCRIPT, str(export_dir), str(data_dir)], cwd=ROOT,
                          capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    if done.returncode != 0:
        raise AssertionError(f"evaluating {export_dir} failed: {done.stderr[-2000:]}")
    total, accuracy = done.stdout.split()[-2:]
    return int(total), float(accuracy)
