"""Every command against an API server that accepts connections and never answers ends
within its --request-timeout with one line naming the server and the fix (exit 1); the
launcher runs as a real process with the real Kubernetes client."""
from __future__ import annotations


import pytest
import yaml

from tests.support.launcher_process import LAUNCHER
from tests.support.silent_server import SilentServer, run_client
from tests.support.tools import ROOT

BOUND = 60.0  # from the first request on, far above 1 s timeout; without a timeout the commands never return


@pytest.fixture
def silent(tmp_path):
    with SilentServer() as server:
        path = tmp_path / "kubeconfig"
        path.write_text(yaml.safe_dump(server.kubeconfig()))
        yield server, path


@pytest.mark.parametrize("argv", [
    ["list"], ["status", "mnist"], ["logs", "mnist"], ["delete", "mnist"],
    ["submit", "--name", "mnist", "--workers", "1", "--detach"],
    ["submit", "--name", "mnist", "--workers", "1", "--dry-run=server"],
])
def test_a_silent_api_server_is_one_line_within_the_request_timeout(silent, argv, tmp_path):
    server, kubeconfig = silent
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "KUBECONFIG": str(kubeconfig),
           "NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1"}
    done = run_client(server, [*LAUNCHER, *argv, "--request-timeout", "1s"], BOUND, cwd=ROOT, env=env)
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len([line for line in lines if line.startswith("error:")]) == 1, done.stderr
    assert lines[-1].startswith(f"error: the Kubernetes API server at {server.url} did not answer in time"), lines
    assert "--request-timeout" in lines[-1] and "--backend local" in lines[-1]
    assert server.accepted >= 1


def test_a_request_the_server_did_not_answer_in_time_is_not_sent_again(silent, tmp_path):
    """urllib3 retries a GET after a read timeout (3 times by default): the user would wait
    four timeouts. The launcher sends it once (client.NoReadTimeoutRetry): one connection."""
    server, kubeconfig = silent
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "KUBECONFIG": str(kubeconfig),
           "NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1"}
    done = run_client(server, [*LAUNCHER, "status", "mnist", "--request-timeout", "1s"], BOUND, cwd=ROOT, env=env)
    assert done.returncode == 1 and "did not answer in time" in done.stderr, done.stderr
    assert server.accepted == 1
