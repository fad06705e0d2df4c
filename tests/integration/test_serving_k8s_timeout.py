"""serve / models / predict on the k8s backend against an API server that accepts
connections and never answers: one line naming the server within --request-timeout, exit 1."""
from __future__ import annotations


import pytest
import yaml

from tests.support.launcher_process import LAUNCHER
from tests.support.silent_server import SilentServer, run_client
from tests.support.tools import ROOT

BOUND = 25.0  # from the first request on, below the 30 s default: passes only if --request-timeout reaches the calls


@pytest.mark.parametrize("argv", [
    ["serve", "mnist", "--model-dir", "gs://bucket/export", "--no-wait"],
    ["serve", "mnist", "--model-dir", "gs://bucket/export", "--dry-run=server"],
    ["models", "list"], ["models", "delete", "mnist"],
    ["predict", "mnist", "--json-instances", "{request}"],
])
def test_a_silent_api_server_is_one_line_within_the_request_timeout(argv, tmp_path):
    request = tmp_path / "request.json"
    request.write_text('{"image": [0.0]}\n')
    with SilentServer() as server:
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(yaml.safe_dump(server.kubeconfig()))
        env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "KUBECONFIG": str(kubeconfig),
               "NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1"}
        done = run_client(server, [*LAUNCHER, *[a.format(request=request) for a in argv], "--backend", "k8s",
                                   "--request-timeout", "1s"], BOUND, cwd=ROOT, env=env)
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"error: the Kubernetes API server at {server.url} did not answer in time"), lines
