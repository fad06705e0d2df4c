"""kubeconfig files as kubectl merges them (launcher.backends.kubeconfig), and the secrets
of a kubeconfig kept out of every error line (client.redact). Real files, no cluster."""
from __future__ import annotations

import os

import yaml

from launcher.backends.k8s.client import REDACTED, redact, remember_secrets
from launcher.backends.kubeconfig import context_namespace


def kubeconfig(path, current: str | None, **namespaces: str):
    doc = {"apiVersion": "v1", "kind": "Config",
           "contexts": [{"name": name, "context": {"cluster": "c", "user": "u", "namespace": ns}}
                        for name, ns in namespaces.items()]}
    if current:
        doc["current-context"] = current
    path.write_text(yaml.safe_dump(doc))
    return path


def test_the_first_file_naming_a_context_or_setting_the_current_one_wins(tmp_path):
    """kubectl: in a KUBECONFIG list, the first file to set a key wins; a later file's
    context of the same name or current-context does not pick the namespace jobs go to."""
    first = kubeconfig(tmp_path / "first", "team", team="team-a")
    second = kubeconfig(tmp_path / "second", "other", team="team-b", other="other-ns")
    env = {"KUBECONFIG": os.pathsep.join([str(first), str(second)])}
    assert context_namespace(None, None, env=env, home=tmp_path) == "team-a"
    assert context_namespace(None, "other", env=env, home=tmp_path) == "other-ns"


def test_in_a_pod_a_kubeconfigs_context_comes_before_the_service_accounts_namespace(tmp_path):
    service_account = tmp_path / "namespace"
    service_account.write_text("pod-ns\n")
    config = kubeconfig(tmp_path / "config", "team", team="team-a")
    assert context_namespace(str(config), None, in_cluster=True, service_account=service_account) == "team-a"
    assert context_namespace(str(tmp_path / "none"), None, in_cluster=True,
                             service_account=service_account) == "pod-ns"


def test_a_kubeconfigs_secrets_of_every_kind_are_redacted(tmp_path):
    """A token, a password and an OIDC auth-provider's client-secret, of ordinary lengths,
    never reach an error line; short values (which would blank out words) are left."""
    secrets = {"token": "tok-3f9a1c77e2", "password": "pw-b81d0e", "client-secret": "cs-5e0c2a9d"}
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump({"users": [
        {"name": "a", "user": {"token": secrets["token"]}},
        {"name": "b", "user": {"username": "admin", "password": secrets["password"]}},
        {"name": "c", "user": {"auth-provider": {"name": "oidc", "config": {
            "client-id": "launcher", "client-secret": secrets["client-secret"], "id-token": "idt"}}}}]}))
    remember_secrets(str(path))
    line = f"error: refused: {' / '.join(secrets.values())} / launcher / idt"
    assert redact(line) == f"error: refused: {REDACTED} / {REDACTED} / {REDACTED} / launcher / idt"


def test_a_kubeconfig_that_is_yaml_but_no_mapping_is_one_line_not_a_traceback(tmp_path):
    import pytest

    from launcher.backends.base import BackendError
    from launcher.backends.kubeconfig import check_kubeconfig

    path = tmp_path / "config"
    path.write_text("- not\n- a kubeconfig\n")
    with pytest.raises(BackendError, match=f"^kubeconfig {path} is not a kubeconfig \\(no mapping\\); fix it"):
        check_kubeconfig(str(path), str(path), None)
    assert context_namespace(str(path), None) is None


def test_a_line_of_a_client_keys_body_is_redacted(tmp_path):
    """client-key-data is base64 of a PEM key: an error quoting one line of its body (not
    the whole block, which the PEM pattern catches) is redacted too."""
    import base64

    body = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQDk3x7Q"
    pem = f"-----BEGIN PRIVATE KEY-----\n{body}\n-----END PRIVATE KEY-----\n"
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump({"users": [{"name": "a", "user": {
        "client-key-data": base64.b64encode(pem.encode()).decode()}}]}))
    remember_secrets(str(path))
    assert redact(f"error: bad key line {body}") == f"error: bad key line {REDACTED}"
