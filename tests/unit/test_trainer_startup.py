"""trainer.task.import_tensorflow_without_keras: a server (ps, or worker of parameter-server
training) imports TensorFlow without the Keras import `import tensorflow` makes by
default, still serves, and can import Keras later. Run in a fresh interpreter: this test
process has TensorFlow and Keras imported already."""
from __future__ import annotations

import subprocess
import sys

from tests.support.trainer_cluster import ROOT, trainer_env

CHECK = """
import sys
from trainer import task

task.import_tensorflow_without_keras()
loaded = sorted(name for name in sys.modules if name == "keras" or name.startswith("keras."))
print("keras modules after the import:", len(loaded), loaded[:3])
assert not loaded, loaded

import tensorflow as tf

server = tf.distribute.Server.create_local_server()  # what a ps or worker starts
with tf.device("/job:localhost/replica:0/task:0/device:CPU:0"):
    assert int(tf.add(1, 2)) == 3

import keras  # later imports of Keras still work

layer = keras.layers.Dense(2)
assert tuple(layer(tf.ones([1, 3])).shape) == (1, 2)
print("ok")
"""


def test_a_server_imports_tensorflow_without_keras_and_keras_still_imports_later():
    done = subprocess.run([sys.executable, "-c", CHECK], cwd=ROOT, env=trainer_env(), capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.splitlines()[-1] == "ok", done.stdout + done.stderr[-3000:]
    assert "keras modules after the import: 0 []" in done.stdout
