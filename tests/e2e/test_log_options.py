"""kubectl's log options through the real apiserver -> node (KWOK) log path: --timestamps
(the CRI time of each line), --since (KWOK's lines are dated 2026-01-01, so a recent
window is empty), --tail; compared with what `kubectl logs` says for the same flags."""
from __future__ import annotations

from typing import Iterator

import pytest

from tests.support.launcher_process import run_launcher
from tests.e2e.tfjobs import wait_running
from tests.support.controlplane import KWOK_DIR

JOB = "logopts-e2e"


def cri_lines() -> list[tuple[str, str]]:
    """(time, text) of each line of k8s/kwok/replica.log."""
    return [(parts[0], parts[3]) for parts in (line.split(" ", 3) for line in
                                               (KWOK_DIR / "replica.log").read_text().splitlines())]


@pytest.fixture(scope="module")
def running_job(control_plane) -> Iterator[str]:
    with control_plane.namespace("e2e-logopts") as namespace:
        result = run_launcher(control_plane, "submit", "--backend", "k8s", "-n", namespace, "--name", JOB,
                              "--workers", "1", "--ps", "0", "--detach")
        assert result.returncode == 0, result.stdout + result.stderr
        wait_running(control_plane, namespace, JOB, 1)
        yield namespace


def launcher_logs(control_plane, namespace: str, *flags: str) -> list[str]:
    result = run_launcher(control_plane, "logs", JOB, "--backend", "k8s", "-n", namespace,
                          "--replica", "worker-0", *flags)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def test_timestamps(control_plane, running_job):
    kubectl = control_plane.kubectl("logs", f"{JOB}-worker-0", "-n", running_job, "--timestamps").stdout.splitlines()
    ours = launcher_logs(control_plane, running_job, "--timestamps")
    assert ours == [f"[worker-0] {line}" for line in kubectl]
    assert [line.split(" ", 2)[1] for line in ours] == [time for time, _ in cri_lines()]


def test_since_and_tail(control_plane, running_job):
    assert launcher_logs(control_plane, running_job, "--since", "1h") == []  # every line is months old
    assert launcher_logs(control_plane, running_job, "--since", "100000h") == [f"[worker-0] {text}"
                                                                               for _, text in cri_lines()]
    assert launcher_logs(control_plane, running_job, "--tail", "1") == [f"[worker-0] {cri_lines()[-1][1]}"]
