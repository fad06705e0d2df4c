"""The programs the scripts and the local backend run with `python -m`: each starts as a
program and says nothing it should not (a module that its package already imported would
print a RuntimeWarning, which the local backend's namespace holder would read as its answer)."""
from __future__ import annotations

import subprocess
import sys

from tests.support.tools import ROOT

TIMEOUT_S = 60


def run(*argv: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-W", "error::RuntimeWarning", *argv], cwd=ROOT, input=stdin,
                          capture_output=True, text=True, timeout=TIMEOUT_S, check=False)


def test_scripts_node_program_starts_and_lists_its_commands():
    done = run("-m", "tests.support.node", "--help")  # what scripts/node/up and down exec
    assert done.returncode == 0, done.stderr
    assert "{up,down,check}" in done.stdout and done.stderr == ""
    assert "serve" not in done.stdout and "SUPPRESS" not in done.stdout  # the internal command stays out of --help


def test_local_backend_programs_start_without_warnings():
    supervisor = run("-m", "launcher.backends.local.supervisor", "--help")
    assert supervisor.returncode == 0 and "run_dir" in supervisor.stdout, supervisor.stderr
    assert supervisor.stderr == ""
    holder = run("-m", "launcher.backends.local.netns")  # the namespace holder: stdin closed, it ends
    assert "RuntimeWarning" not in holder.stdout + holder.stderr, holder.stdout + holder.stderr
