"""Issue 22: no error of the k8s backend prints a kubeconfig's credentials: bearer token,
basic-auth password, client key, or what an exec credential plugin prints. Every command
runs as a real `python -m launcher` process; the paths here need no API server
(unreachable server, bad context, malformed kubeconfig, failing exec plugin); the 401 /
403 / rejected-client-certificate paths run against the real apiserver in
tests/e2e/test_kubeconfig_secrets.py."""
from __future__ import annotations

import os
import subprocess

import pytest

from tests.support.kubeconfig_secrets import Secrets, kubeconfig, users
from tests.support.launcher_process import run_launcher
from tests.support.ports import free_port

COMMANDS = (("status", "job"), ("list",), ("logs", "job"), ("delete", "job"),
            ("submit", "--name", "job", "--workers", "1"))


@pytest.fixture(scope="module")
def secrets_() -> Secrets:
    return Secrets()


def check(secrets_: Secrets, done: subprocess.CompletedProcess, expected: str) -> None:
    output = done.stdout + done.stderr
    assert done.returncode != 0 and expected in output, output
    assert not secrets_.leaks(output), (secrets_.leaks(output), output)


@pytest.mark.parametrize("user, command", [(user, command) for user in ("token", "exec plugin failing")
                                           for command in COMMANDS]
                         + [(user, COMMANDS[0]) for user in ("password", "client key", "exec plugin token")],
                         ids=lambda v: v if isinstance(v, str) else v[0])
def test_unreachable_server(tmp_path, secrets_, user, command):
    config = kubeconfig(tmp_path / "config", f"https://127.0.0.1:{free_port()}", users(secrets_, tmp_path)[user])
    expected = "exec credential plugin failed" if user == "exec plugin failing" else "cannot reach"
    check(secrets_, run_launcher(os.environ, *command, "--kubeconfig", str(config)), expected)


@pytest.mark.parametrize("user", ["token", "client key", "exec plugin failing"])
def test_bad_context(tmp_path, secrets_, user):
    config = kubeconfig(tmp_path / "config", "https://127.0.0.1:1", users(secrets_, tmp_path)[user])
    check(secrets_, run_launcher(os.environ, "status", "job", "--kubeconfig", str(config), "--context", "nope"), "nope")


def test_malformed_kubeconfig_next_to_a_token(tmp_path, secrets_):
    config = tmp_path / "config"
    config.write_text(f"users:\n- name: u\n  user:\n    token: {secrets_.token}\n   bad: [indent\n")
    check(secrets_, run_launcher(os.environ, "list", "--kubeconfig", str(config)), "cannot be read as YAML")


def test_exec_plugin_failure_says_so_without_its_output(tmp_path, secrets_):
    config = kubeconfig(tmp_path / "config", "https://127.0.0.1:1", users(secrets_, tmp_path)["exec plugin failing"])
    done = run_launcher(os.environ, "list", "--kubeconfig", str(config))
    check(secrets_, done, "exec credential plugin failed with exit code 1")
