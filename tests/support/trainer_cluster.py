"""A local cluster of real `python -m trainer.task` processes on 127.0.0.1, and the
`mnist_dir` fixture (a small slice of real MNIST as TFRecords, written once per session).

TF_CONFIG comes from launcher.tfconfig (the one implementation of the operator's rules),
with free local ports instead of service DNS names; each replica gets the local backend's
CPU priority (launcher.backends.local.plan.replica_nice) and, as there, a process group of
its own in this process's session. Every process writes its output to its own log file;
`stop()` (also on context exit) kills and reaps whatever still runs.

    with TrainerCluster({"Chief": 1, "PS": 1, "Worker": 2}, args, tmp_path) as cluster:
        codes = cluster.wait(timeout=300)
        print(cluster.log("chief-0"))
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from launcher.backends.local.plan import replica_nice
from launcher.events import Progress, parse_progress
from launcher.render import render
from launcher.spec import JobSpec, ReplicaSpec
from launcher.tfconfig import replicas, tf_config
from tests.support.polling import wait_for
from tests.support.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
LOCAL = "127.0.0.1"
TRAIN_SLICE, TEST_SLICE = 2000, 500
_FINAL_LINE = re.compile(r"^Final metrics after (\d+) steps: loss ([0-9.]+), accuracy ([0-9.]+)", re.M)
_EXPORT_LINE = re.compile(r"^Exported model to (\S+)$", re.M)


@pytest.fixture(scope="session")
def mnist_dir(tmp_path_factory) -> str:
    """The first 2000 train / 500 test images of real MNIST as TFRecords."""
    out = str(tmp_path_factory.mktemp("mnist") / "data")
    write_mnist(out)
    return out


def write_mnist(out: str, env: dict[str, str] | None = None) -> None:
    """`python -m trainer.data` for the test slice into `out` (local or gs://)."""
    done = run_module("trainer.data", ["--out", out, "--offline", "--train-limit", str(TRAIN_SLICE),
                                       "--test-limit", str(TEST_SLICE)], env, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]


def progress(log: str) -> list[Progress]:
    """Every Train line, parsed as the launcher parses it."""
    return [p for p in map(parse_progress, log.splitlines()) if p is not None]


def final_metrics(log: str) -> tuple[int, float, float] | None:
    match = _FINAL_LINE.search(log)
    return (int(match[1]), float(match[2]), float(match[3])) if match else None


def export_path(log: str) -> str | None:
    match = _EXPORT_LINE.search(log)
    return match[1] if match else None


def trainer_env(extra: dict[str, str | None] | None = None) -> dict[str, str]:
    """Environment for trainer processes: one thread each, no proxy for local gRPC; `extra`
    on top (None unsets a variable: {"TF_CPP_MIN_LOG_LEVEL": None} leaves TensorFlow's log
    level to the command, as a user's shell does)."""
    env = dict(os.environ)
    env.pop("TF_CONFIG", None)
    no_proxy = [h for h in env.get("no_proxy", "").split(",") if h]
    env["no_proxy"] = ",".join(dict.fromkeys([*no_proxy, LOCAL, "localhost"]))
    env.update({"PYTHONUNBUFFERED": "1", "TRAINER_THREADS": "1", "TRAINER_POLL_SECONDS": "0.5",
                "TF_CPP_MIN_LOG_LEVEL": "1"})
    for name, value in (extra or {}).items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


# run_module's `env` for a command as a user's shell runs it (no TF_CPP_MIN_LOG_LEVEL set)
# with oneDNN on, as TensorFlow turns it on by default on CPUs with AVX-512 VNNI: its lines
# come before TensorFlow reads TF_CPP_MIN_LOG_LEVEL (trainer.lazy.QuietExtensions drops them)
USER_SHELL_ONEDNN_ON = {"TF_CPP_MIN_LOG_LEVEL": None, "TF_ENABLE_ONEDNN_OPTS": "1"}


def run_module(module: str, args: list[str], env: dict[str, str | None] | None = None,
               timeout: float = 300, stdout=None) -> subprocess.CompletedProcess:
    """Run `python -m MODULE ARGS` from the repo root to completion (bounded); `stdout`: a
    file or fd to write to instead of capturing it (the result's stdout is then None)."""
    streams = {"capture_output": True} if stdout is None else {"stdout": stdout, "stderr": subprocess.PIPE}
    return subprocess.run([sys.executable, "-m", module, *args], cwd=ROOT, env=trainer_env(env), text=True,
                          timeout=timeout, **streams)


def spawn(args: list[str], log_path: Path, env: dict[str, str], append: bool = False,
          nice: int = 0, session: bool = False) -> subprocess.Popen:
    """`python -m trainer.task ARGS`, its output to `log_path` (appended to: a restart), its
    nice value raised by `nice`, in a process group of its own as the local backend's
    supervisor starts a replica (`session`: in a session of its own instead)."""
    group = {"start_new_session": True} if session else {"process_group": 0}
    with open(log_path, "ab" if append else "wb") as log:
        return subprocess.Popen([sys.executable, "-m", "trainer.task", *args], cwd=ROOT, env=env,
                                stdout=log, stderr=subprocess.STDOUT, **group,
                                preexec_fn=(lambda: os.nice(nice)) if nice else None)


_EVALUATE_EXPORT = """
import json, sys
import numpy as np
import tensorflow as tf

from trainer import data
serve = tf.saved_model.load(sys.argv[1]).signatures["serving_default"]
hits = count = 0
for images, labels in data.dataset(sys.argv[2], "test", 500, training=False):
    keys = tf.range(tf.shape(labels, out_type=tf.int64)[0])
    classes = serve(image=tf.reshape(images, [-1, 784]), key=keys)["classes"].numpy()
    hits += int(np.sum(classes == labels.numpy()))
    count += len(labels)
print(json.dumps({"accuracy": hits / count, "count": count}))
"""


_SUMMARIES = """
import json, sys
import tensorflow as tf
tags, values, graph = {}, {}, False
for path in tf.io.gfile.glob(sys.argv[1] + "/events.out.tfevents.*"):
    for event in tf.compat.v1.train.summary_iterator(path):
        graph = graph or bool(event.graph_def)
        for value in event.summary.value:
            kind = value.metadata.plugin_data.plugin_name or "scalars"
            tags.setdefault(kind, {}).setdefault(value.tag, []).append(event.step)
            array = tf.make_ndarray(value.tensor) if value.HasField("tensor") else value.simple_value
            # a scalar's value; a histogram's (left, right, count) buckets: how many values it holds
            number = float(array[:, 2].sum()) if kind == "histograms" else float(array)
            values.setdefault(value.tag, []).append(number)
print(json.dumps({"graph": graph, **tags, "values": values}))
"""


def summaries(directory: str) -> dict:
    """What TensorBoard finds in `directory`'s event files: {"graph": bool, "scalars":
    {tag: [steps]}, "histograms": {tag: [steps]}, "values": {tag: [each scalar's value, or
    how many numbers each histogram counts]}} in the files' order (read in a subprocess)."""
    done = subprocess.run([sys.executable, "-c", _SUMMARIES, directory], cwd=ROOT, env=trainer_env(),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.splitlines()[-1])


def evaluate_export(export: str, data_dir: str, env: dict[str, str] | None = None) -> tuple[float, int]:
    """(accuracy, examples) of the SavedModel's serving_default on the test split of
    `data_dir`, in a subprocess (the test process stays free of TensorFlow)."""
    done = subprocess.run([sys.executable, "-c", _EVALUATE_EXPORT, export, data_dir], cwd=ROOT,
                          env=trainer_env(env), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.splitlines()[-1])
    return result["accuracy"], result["count"]


@dataclass
class Replica:
    name: str  # e.g. "worker-1"
    process: subprocess.Popen
    log_path: Path
    rtype: str = ""  # as in the TFJob: Chief, PS, Worker, Evaluator
    index: int = 0


class TrainerCluster:
    def __init__(self, counts: dict[str, int], args: list[str], workdir: Path,
                 env: dict[str, str] | None = None, name: str = "local", priority: bool = True):
        """priority=False: every replica in a session of its own at this process's nice
        value, as the local backend ran them before it gave the chief priority (for
        bench/time_to_accuracy.py's `ps-equal`)."""
        self.priority = priority
        spec = JobSpec(name=name, replicas={role: ReplicaSpec(count) for role, count in counts.items()})
        self.tfjob = render(spec)
        self.args = list(args)
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        # the replicas' temporary folders in the test's: a replica a test kills outright
        # leaves its trainer-* folder there, not in /tmp
        (self.workdir / "tmp").mkdir(exist_ok=True)
        self.env = trainer_env({"TMPDIR": str(self.workdir / "tmp"), **(env or {})})
        ports = {(rtype.lower(), index): free_port() for rtype, index in replicas(self.tfjob)}
        self.address = lambda rt, index: f"{LOCAL}:{ports[(rt, index)]}"
        self.replicas: dict[str, Replica] = {}

    def tf_config(self, rtype: str, index: int) -> str | None:
        return tf_config(self.tfjob, rtype, index, self.address)

    def _spawn(self, rtype: str, index: int, args: list[str], log_path: Path, append: bool) -> subprocess.Popen:
        """Replica (rtype, index) as a process, with its TF_CONFIG and CPU priority."""
        env = dict(self.env)
        config = self.tf_config(rtype, index)
        if config is not None:
            env["TF_CONFIG"] = config
        nice = replica_nice(self.tfjob, rtype) if self.priority else 0
        return spawn(args, log_path, env, append=append, nice=nice, session=not self.priority)

    def start(self, names: list[str] | None = None) -> "TrainerCluster":
        """Start the replicas not started yet (only `names`, e.g. ["chief-0"], when given)."""
        for rtype, index in replicas(self.tfjob):
            name = f"{rtype.lower()}-{index}"
            if name in self.replicas or (names is not None and name not in names):
                continue
            log_path = self.workdir / f"{name}.log"
            process = self._spawn(rtype, index, self.args, log_path, append=False)
            self.replicas[name] = Replica(name, process, log_path, rtype, index)
        return self

    def restart(self, name: str, args: list[str] | None = None) -> None:
        """Start replica `name` again once it has exited (its log grows on), as the
        operator restarts a pod: same TF_CONFIG and address; `args` replace the flags."""
        replica = self.replicas[name]
        assert replica.process.poll() is not None, f"{name} still runs"
        replica.process = self._spawn(replica.rtype, replica.index, args or self.args, replica.log_path, append=True)

    def wait_for_line(self, name: str, text: str, timeout: float) -> None:
        """Until `text` appears in the log of `name` (bounded; fails early if it exits)."""
        def alive() -> None:
            if self.replicas[name].process.poll() is not None and text not in self.log(name):
                raise AssertionError(f"{name} exited before printing {text!r}\n{self.tails()}")

        wait_for(lambda: text in self.log(name), lambda: f"{name} to print {text!r}\n{self.tails()}", timeout,
                 check=alive, interval=0.2)

    def wait(self, timeout: float, names: list[str] | None = None) -> dict[str, int]:
        """Exit codes of `names` (default: all); TimeoutError naming who still runs. When
        the chief is among them and has failed while others run, AssertionError at once:
        there is no operator here to restart it, and the servers wait for its done marker
        until the orphan rule (900 s by default) ends them."""
        names = names or list(self.replicas)

        def codes() -> dict[str, int | None]:
            return {n: self.replicas[n].process.poll() for n in names}

        def running() -> str:
            return f"{[n for n, code in codes().items() if code is None]} to exit\n{self.tails()}"

        def chief_failed() -> None:
            now = codes()
            if now.get("chief-0") not in (None, 0) and None in now.values():
                raise AssertionError(f"chief-0 exited {now['chief-0']} while {running()}")

        def finished() -> dict[str, int] | None:
            now = codes()
            return now if all(code is not None for code in now.values()) else None

        return wait_for(finished, running, timeout, check=chief_failed, interval=0.2)

    def log(self, name: str) -> str:
        return self.replicas[name].log_path.read_text(errors="replace")

    def lines_with(self, text: str) -> list[str]:
        """`replica: line` for every line of every replica's log that contains `text`."""
        return [f"{name}: {line}" for name in self.replicas for line in self.log(name).splitlines() if text in line]

    def tails(self, lines: int = 15) -> str:
        return "\n".join(f"--- {n} ---\n" + "\n".join(self.log(n).splitlines()[-lines:]) for n in self.replicas)

    def stop(self) -> None:
        for replica in self.replicas.values():
            reap(replica.process)

    def __enter__(self) -> "TrainerCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def reap(process: subprocess.Popen, grace: float = 5.0) -> None:
    """Terminate, then kill, and always wait: no zombie or orphan survives a test."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            process.kill()
    process.wait(timeout=30)
