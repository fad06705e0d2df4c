"""`scripts/node/up` on a machine that cannot run the node: one line naming what is
missing, exit 2, nothing started, built or written. Real refusals, no node: the script run
as an unprivileged user, and the script and its program (`python -m tests.support.node up`,
what the script execs once its builds are done) in a mount namespace of its own where no
cgroup filesystem is mounted, as on a machine without cgroups."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.tools import ROOT

TIMEOUT_S = 120
NOBODY = 65534


def node_env(tmp_path: Path) -> dict[str, str]:
    """The node's state under tmp_path (TFJOB_NODE_ROOT), so the test sees anything written."""
    return dict(os.environ, TFJOB_NODE_ROOT=str(tmp_path / "node" / "root"))


def test_without_root_scripts_node_up_is_one_line_and_exit_2(tmp_path):
    unprivileged = [] if os.geteuid() != 0 else [
        "setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--inh-caps=-all"]
    done = subprocess.run([*unprivileged, str(ROOT / "scripts" / "node" / "up")], cwd="/", env=node_env(tmp_path),
                          capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.splitlines() == ["scripts/node/up: root is needed (network namespace, mounts, cgroups): "
                                        "run it as root, e.g. with sudo"], done.stderr
    assert done.stdout == "" and not (tmp_path / "node").exists()  # no build ran, nothing was written


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: makes a mount namespace without cgroups")
@pytest.mark.parametrize("command", [
    [sys.executable, "-m", "tests.support.node", "up", "--timeout", "30"],
    [str(ROOT / "scripts" / "node" / "up"), "--timeout", "30"],  # says so before its builds print a line
], ids=["program", "script"])
def test_without_cgroups_the_node_program_is_one_line_and_exit_2(tmp_path, command):
    # private propagation: the unmount stays inside the namespace, which ends with the process
    hide_cgroups = "umount -R /sys/fs/cgroup && exec \"$@\""
    done = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", hide_cgroups, "sh",
                           *command], cwd=ROOT, env=node_env(tmp_path), capture_output=True, text=True,
                          timeout=TIMEOUT_S, check=False)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.splitlines() == ["scripts/node: no cgroup filesystem mounted under /sys/fs/cgroup"], done.stderr
    assert done.stdout == "" and not (tmp_path / "node").exists()
    mounts = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    assert any(m.startswith("/sys/fs/cgroup") for m in mounts)  # this process's (the host's) are untouched
