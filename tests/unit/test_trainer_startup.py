"""Start-up imports, each in a fresh interpreter (this test process has TensorFlow and
Keras imported already):
- trainer.task.import_tensorflow_without_keras: a server (ps, or worker of
  parameter-server training) imports TensorFlow without the Keras import `import
  tensorflow` makes by default, still serves, and can import Keras later;
- the trainer's other commands answer --help and a bad flag without importing TensorFlow
  (trainer.lazy), and import it when they do their work."""
from __future__ import annotations

import subprocess
import sys

import pytest

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


HELP = """
import contextlib, io, runpy, sys
sys.argv = ["{module}", *{argv!r}]
out = io.StringIO()
with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
    try:
        runpy.run_module("{module}", run_name="__main__", alter_sys=True)
    except SystemExit as done:
        code = done.code
print("exit", code, "tensorflow" in sys.modules, "keras" in sys.modules)
print(out.getvalue())
"""


@pytest.mark.parametrize("module", ["trainer.predict", "trainer.make_request", "trainer.data"])
@pytest.mark.parametrize("argv, code", [(["--help"], 0), (["--no-such-flag"], 2)])
def test_a_command_answers_help_and_bad_flags_without_importing_tensorflow(module, argv, code):
    done = subprocess.run([sys.executable, "-c", HELP.format(module=module, argv=argv)], cwd=ROOT,
                          env=trainer_env(), capture_output=True, text=True, timeout=120)
    first, *text = done.stdout.splitlines()
    assert first == f"exit {code} False False", done.stdout + done.stderr[-3000:]
    assert f"usage: python -m {module}" in "\n".join(text)


def test_the_lazy_module_imports_on_first_use():
    check = ("import sys; from trainer import lazy; m = lazy.module('json'); sys.modules.pop('json', None); "
             "assert 'json' not in sys.modules; print(m.dumps([1])); assert 'json' in sys.modules")
    done = subprocess.run([sys.executable, "-c", check], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout == "[1]\n", done.stdout + done.stderr
