"""Certificates and kubeconfig of the e2e control plane (tests/support/controlplane/),
issued by tests/support/certs.py: one throw-away CA signs a serving certificate for
127.0.0.1/localhost (apiserver, KWOK's kubelet endpoint, the operator's webhook server,
the real node's kubelet) and an admin client certificate in the group system:masters;
plus the service-account signing key pair."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from tests.support.certs import Authority, signing_key_pair


@dataclass(frozen=True)
class Pki:
    """PEM files: CA, a serving cert for 127.0.0.1/localhost, an admin client cert
    (group system:masters), and the service-account signing key pair."""

    ca: Path
    serving_cert: Path
    serving_key: Path
    admin_cert: Path
    admin_key: Path
    sa_key: Path
    sa_pub: Path


def make_pki(directory: Path, extra_ips: tuple[str, ...] = ()) -> Pki:
    """`extra_ips`: more addresses the serving certificate covers (a real node's IP: its
    kubelet serves it, and the apiserver checks it when it proxies `kubectl logs`)."""
    directory.mkdir(parents=True, exist_ok=True)
    pki = Pki(*(directory / name for name in (
        "ca.crt", "serving.crt", "serving.key", "admin.crt", "admin.key", "sa.key", "sa.pub")))
    ca = Authority()
    ca.write(pki.ca)
    ca.issue(pki.serving_cert, pki.serving_key, "127.0.0.1", *extra_ips, "localhost")
    ca.issue(pki.admin_cert, pki.admin_key, user="e2e-admin", group="system:masters")
    signing_key_pair(pki.sa_key, pki.sa_pub)
    return pki


def write_kubeconfig(path: Path, server: str, pki: Pki) -> None:
    config = {
        "apiVersion": "v1", "kind": "Config", "current-context": "e2e",
        "clusters": [{"name": "e2e", "cluster": {"server": server, "certificate-authority": str(pki.ca)}}],
        "users": [{"name": "e2e-admin", "user": {"client-certificate": str(pki.admin_cert),
                                                 "client-key": str(pki.admin_key)}}],
        "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": "e2e-admin",
                                                 "namespace": "default"}}],
    }
    path.write_text(yaml.safe_dump(config))


