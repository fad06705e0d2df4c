"""Issue 22, against the real kube-apiserver: 401 (a token it does not know, or one an
exec credential plugin mints, or a client certificate its CA did not sign), 403 (a real
service-account token without RBAC rights): every k8s command
fails with one error line that names the problem and prints none of the credentials. And
what is accepted: a service account's token from an exec credential plugin, the kubeconfig
found through $KUBECONFIG."""
from __future__ import annotations

import sys

import pytest
import yaml

from tests.support.k8s_backend import manifest
from tests.support.launcher_process import run_launcher
from tests.support.kubeconfig_secrets import Secrets, kubeconfig, users

COMMANDS = (("status", "job"), ("list",), ("logs", "job"), ("delete", "job"),
            ("submit", "--name", "job", "--workers", "1"))


def ca_of(cp) -> str:
    return yaml.safe_load(cp.kubeconfig.read_text())["clusters"][0]["cluster"]["certificate-authority"]


def run_all(cp, secrets: Secrets, config, expected: tuple[str, ...]) -> None:
    for command in COMMANDS:
        done = run_launcher(cp, *command, "--kubeconfig", str(config))
        output = done.stdout + done.stderr
        assert done.returncode != 0 and any(e in output for e in expected), (command, output)
        assert not secrets.leaks(output), (command, secrets.leaks(output), output)


@pytest.mark.parametrize("user, expected", [
    ("token", ("Unauthorized",)),
    ("exec plugin token", ("Unauthorized",)),
    ("client key", ("Unauthorized",)),  # the apiserver takes the TLS handshake, then refuses the identity
])
def test_rejected_credentials(control_plane, tmp_path, user, expected):
    secrets = Secrets()
    config = kubeconfig(tmp_path / "config", control_plane.server, users(secrets, tmp_path)[user], ca=ca_of(control_plane))
    run_all(control_plane, secrets, config, expected)


def test_forbidden_service_account(control_plane, tmp_path):
    with control_plane.namespace("nobody") as ns:
        control_plane.kubectl("create", "serviceaccount", "nobody", "-n", ns)
        token = control_plane.kubectl("create", "token", "nobody", "-n", ns).stdout.strip()
        secrets = Secrets(token=token)
        config = kubeconfig(tmp_path / "config", control_plane.server, {"token": token}, ca=ca_of(control_plane))
        run_all(control_plane, secrets, config, ("forbidden", "Forbidden"))


def exec_user(token: str) -> dict:
    """A kubeconfig user whose exec credential plugin (a Python one-liner) prints `token`."""
    credential = ('import json; print(json.dumps({"apiVersion": "client.authentication.k8s.io/v1beta1", '
                  f'"kind": "ExecCredential", "status": {{"token": "{token}"}}}}))')
    return {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": sys.executable,
                     "args": ["-c", credential], "interactiveMode": "Never"}}


def test_an_exec_credential_plugin_and_kubeconfig_from_the_environment_are_accepted(control_plane, tmp_path):
    """A service account allowed to create and list TFJobs in its namespace, its token
    minted by an exec plugin (as gke-gcloud-auth-plugin does); the kubeconfig found through
    $KUBECONFIG."""
    from launcher.backends.k8s import KubernetesBackend

    cp = control_plane
    with cp.namespace("exec") as ns, cp.in_process() as env:
        cp.service_account(ns, "submitter", "create,get,list,watch", "tfjobs.kubeflow.org")
        token = cp.kubectl("create", "token", "submitter", "-n", ns).stdout.strip()
        config = kubeconfig(tmp_path / "config", cp.server, exec_user(token), ca=ca_of(cp))
        env.setenv("KUBECONFIG", str(config))
        backend = KubernetesBackend()  # no --kubeconfig: $KUBECONFIG
        try:
            backend.submit(manifest(namespace=ns))
            assert [job.name for job in backend.list(ns)] == ["mnist"]
        finally:
            backend.close()
