"""tests/support/controlplane: a Tuning's flags and environment reach the process they name,
after its usual flags (so they win), and no other process; LARGE_JOBS (the scale bench's)
names processes the control plane has. The "binary" is a shell script that writes what it
was started with."""
from __future__ import annotations

import os
import stat

from tests.support.controlplane import BINARIES, LARGE_JOBS
from tests.support.controlplane.procs import Processes, Tuning
from tests.support.polling import wait_for

SCRIPT = '#!/bin/sh\nprintf "%s\\n" "$@" > "$0.args"\necho "GOGC=$GOGC" > "$0.env"\n'


def started(tmp_path, tuning: Tuning, name: str, *args: str) -> tuple[list[str], str]:
    binary = tmp_path / name
    binary.write_text(SCRIPT)
    binary.chmod(binary.stat().st_mode | stat.S_IXUSR)
    procs = Processes(tmp_path, tmp_path / "logs", dict(os.environ, GOGC=""), tuning=tuning)
    try:
        procs.start(name, name, *args)
        wait_for(lambda: (tmp_path / f"{name}.env").exists(), f"{name} to write what it got", 30)
        procs.running[name].wait(timeout=30)
    finally:
        procs.stop_all()
    return (tmp_path / f"{name}.args").read_text().split(), (tmp_path / f"{name}.env").read_text().strip()


def test_a_tuning_adds_its_flags_last_and_its_environment_to_the_process_it_names(tmp_path):
    tuning = Tuning(args={"etcd": ("--snapshot-count=1000",)}, env={"etcd": {"GOGC": "25"}})
    args, env = started(tmp_path, tuning, "etcd", "--snapshot-count=10000", "--name=e2e")
    assert args == ["--snapshot-count=10000", "--name=e2e", "--snapshot-count=1000"]
    assert env == "GOGC=25"


def test_a_tuning_leaves_the_processes_it_does_not_name_alone(tmp_path):
    tuning = Tuning(args={"etcd": ("--snapshot-count=1000",)}, env={"etcd": {"GOGC": "25"}})
    args, env = started(tmp_path, tuning, "kwok", "--node-ip=127.0.0.1")
    assert args == ["--node-ip=127.0.0.1"]
    assert env == "GOGC="


def test_large_jobs_names_processes_of_the_control_plane():
    names = {"training-operator" if b == "training-operator.v1" else b for b in BINARIES}
    assert set(LARGE_JOBS.args) | set(LARGE_JOBS.env) <= names
    assert LARGE_JOBS.args["etcd"] and all(env["GOGC"] for env in LARGE_JOBS.env.values())
