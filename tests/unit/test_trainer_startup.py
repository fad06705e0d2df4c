"""Start-up imports, each in a fresh interpreter (this test process has TensorFlow and
Keras imported already):
- trainer.task.import_server_tensorflow: a server (ps, or worker of parameter-server
  training) imports the TensorFlow modules it uses, neither the `tf.` API nor Keras,
  serves with the trainer's own start_server and done-marker polling, and the rest of
  TensorFlow (and Keras) imports on first use; with a `tensorflow-plugins` directory
  where TensorFlow's __init__ would load it, TensorFlow is imported whole at once;
- the trainer's other commands answer --help and a bad flag without importing TensorFlow
  (trainer.lazy), and import it when they do their work;
- lazy.quiet_tensorflow's filter of what TensorFlow's libraries write to stderr as they
  load: absl's lines below TF_CPP_MIN_LOG_LEVEL dropped, every other line passed on."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.support.trainer_cluster import ROOT, trainer_env
from trainer import lazy

CHECK = """
import sys
from trainer import task
from trainer.cluster import Cluster

task.import_server_tensorflow()
from trainer import lifecycle, runtime  # what task.serve uses

def loaded(prefix):
    return sorted(name for name in sys.modules if name == prefix or name.startswith(prefix + "."))

server = runtime.start_server(Cluster(role="ps", index=0, spec={"ps": ["127.0.0.1:0"]}), 1)
job_dir = sys.argv[1]  # the test's tmp_path: removed with it
watch = lifecycle.Watch(job_dir, None, 0.1, 60.0)
assert watch.check() is None  # no done marker yet
lifecycle.write_done(job_dir, 10, None)
assert watch.check() == lifecycle.DONE
print("serving:", server.target.startswith("grpc://127.0.0.1:"), "keras:", len(loaded("keras")),
      "tf API:", len(loaded("tensorflow._api")), "plugins:", task.tensorflow_plugins())

import tensorflow as tf  # a later `tf.` read imports the rest, Keras too

assert int(tf.add(1, 2)) == 3
import keras

layer = keras.layers.Dense(2)
assert tuple(layer(tf.ones([1, 3])).shape) == (1, 2)
print("ok", len(loaded("tensorflow._api")) > 100)
"""


def test_a_server_imports_only_the_tensorflow_it_uses_and_the_rest_on_first_use(tmp_path):
    done = subprocess.run([sys.executable, "-c", CHECK, str(tmp_path)], cwd=ROOT, env=trainer_env(),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.splitlines()[-1] == "ok True", done.stdout + done.stderr[-3000:]
    assert "serving: True keras: 0 tf API: 0 plugins: []" in done.stdout


def test_a_server_imports_all_of_tensorflow_when_it_would_load_plugins(tmp_path):
    """TensorFlow's __init__ loads the kernels of `tensorflow-plugins` directories in the
    site-packages directories on sys.path: a server must have them, so it imports it whole."""
    site = tmp_path / "lib" / "site-packages"
    (site / "tensorflow-plugins").mkdir(parents=True)  # empty: TensorFlow loads nothing from it
    check = ("import sys; sys.path.append(sys.argv[1]); from trainer import task; task.import_server_tensorflow(); "
             "print(task.tensorflow_plugins(), type(sys.modules['tensorflow']).__name__, "
             "'tensorflow._api.v2.io' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", check, str(site)], cwd=ROOT, env=trainer_env(), capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines()[-1] == f"[{str(site / 'tensorflow-plugins')!r}] module True", done.stdout


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
    if code == 0:
        assert f"usage: python -m {module}" in "\n".join(text)
    else:  # one line (trainer.flags.Parser), in the command's own style (predict's: its required flags first)
        [line] = [line for line in text if line]
        assert line.startswith(f"{module}: ") and line.endswith(" (see --help)"), text


def test_the_lazy_module_imports_on_first_use():
    check = ("import sys; from trainer import lazy; m = lazy.module('json'); sys.modules.pop('json', None); "
             "assert 'json' not in sys.modules; print(m.dumps([1])); assert 'json' in sys.modules")
    done = subprocess.run([sys.executable, "-c", check], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout == "[1]\n", done.stdout + done.stderr


INFO = b"I0000 00:00:1795864101.379724   22312 port.cc:153] oneDNN custom operations are on.\n"
WARNING = b"W1128 11:02:16.123456    7 cuda_executor.cc:9] no GPU\n"
BEFORE_INIT = b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n"


@pytest.mark.parametrize("line, level, passed", [
    (INFO, 1, False), (INFO, 0, True),
    (WARNING, 1, True), (WARNING, 2, False),
    (b"E1128 11:02:16.123456    7 x.cc:9] boom\n", 2, True), (b"F1128 11:02:16.123456 7 x.cc:9] abort\n", 3, True),
    (BEFORE_INIT, 1, False), (BEFORE_INIT, 0, True),
    (b"Traceback (most recent call last):\n", 3, True), (b"I0000 is no absl line\n", 3, True),
])
def test_the_filter_drops_absl_lines_below_the_level_and_passes_every_other(line, level, passed):
    assert lazy.shown(line, level) is passed


FILTERED = """
import os, sys
from trainer import lazy

with lazy.filtered_stderr(1):
    for line in sys.argv[1:]:
        os.write(2, line.encode())
    print("python's own stderr", file=sys.stderr)
    os.write(2, b"x" * 200000 + b"\\n")  # more than a pipe holds: the pump keeps it flowing
print("after", file=sys.stderr)
"""


def test_the_filter_passes_what_it_keeps_in_order_and_restores_stderr():
    lines = [INFO.decode(), BEFORE_INIT.decode(), WARNING.decode(), "plain\n"]
    done = subprocess.run([sys.executable, "-c", FILTERED, *lines], cwd=ROOT, env=trainer_env(), capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr.splitlines() == [WARNING.decode().strip(), "plain", "python's own stderr", "x" * 200000,
                                        "after"]


BAD_CONFIG = """
import sys
from trainer import task
code = task.main(["--job-dir", sys.argv[1]])
print("exit", code, "tensorflow" in sys.modules, "keras" in sys.modules)
"""


def test_a_bad_tf_config_exits_2_in_one_line_before_tensorflow_is_imported(tmp_path):
    """A crash-looping pod with a bad TF_CONFIG fails at once, not after TensorFlow's import."""
    job_dir = tmp_path / "job"
    config = '{"cluster": {"chief": ["127.0.0.1:2222"]}, "task": {"type": "boss", "index": 0}}'
    done = subprocess.run([sys.executable, "-c", BAD_CONFIG, str(job_dir)], cwd=ROOT, capture_output=True, text=True,
                          env=trainer_env({"TF_CONFIG": config}), timeout=120)
    assert done.stdout.splitlines() == ["exit 2 False False"], done.stdout + done.stderr[-3000:]
    [line] = done.stderr.splitlines()
    assert line.startswith("trainer: TF_CONFIG") and "unknown role 'boss'" in line
    assert not job_dir.exists()


def test_a_job_dir_that_cannot_be_written_is_refused_before_the_data_is_read(tmp_path, capsys):
    from trainer import flags, task
    from trainer.cluster import Cluster

    (tmp_path / "file").write_text("")
    args = flags.parse(["--job-dir", str(tmp_path / "file" / "job"), "--data-dir", str(tmp_path / "no-data")])
    assert task.compute(args, Cluster()) == 2
    out, err = capsys.readouterr()
    [line] = err.splitlines()
    assert line.startswith(f"trainer: --job-dir: {tmp_path / 'file'}") and out == "", err


def test_the_trainer_names_master_chief_in_tf_config_for_tensorflows_readers(tmp_path, monkeypatch, capsys):
    """Cloud ML Engine's and older operators' `master`: TensorFlow's own readers of TF_CONFIG
    know `chief` only."""
    import json

    from trainer import task

    config = {"cluster": {"master": ["m:1"], "worker": ["w:1"]}, "task": {"type": "master", "index": 0}}
    monkeypatch.setenv("TF_CONFIG", json.dumps(config))
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "1")  # main() sets it where unset
    roles = []
    monkeypatch.setattr(task, "run_role", lambda args, cluster: roles.append(cluster) or 0)
    assert task.main(["--job-dir", str(tmp_path / "job")]) == 0
    assert json.loads(os.environ["TF_CONFIG"]) == {"cluster": {"chief": ["m:1"], "worker": ["w:1"]},
                                                   "task": {"type": "chief", "index": 0}, "environment": "cloud"}
    assert roles[0].role == "chief"
    assert capsys.readouterr().out == f"Starting chief/0 (sync mode), job dir {tmp_path / 'job'}\n"


def test_quieting_tensorflow_keeps_a_log_level_the_user_set(monkeypatch):
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "0")  # the user's: every line back
    lazy.quiet_tensorflow()
    assert os.environ["TF_CPP_MIN_LOG_LEVEL"] == "0"
    monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL")
    lazy.quiet_tensorflow()
    assert os.environ["TF_CPP_MIN_LOG_LEVEL"] == "1"  # unset: INFO hidden
