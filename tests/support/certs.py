"""Certificates for tests: the one helper, built on trustme (https://trustme.readthedocs.io).

    ca = Authority()                          a throw-away CA (ECDSA P-256)
    ca.write(path)                            its certificate (PEM), for whoever must trust it
    ca.issue(cert, key, "127.0.0.1", "localhost", ...)
                                              a serving certificate for those IPs and names
    ca.issue(cert, key, user="e2e-admin", group="system:masters")
                                              a client certificate (Kubernetes reads CN as the
                                              user name, O as the group)
    untrusted_client("someone")               (cert PEM, key PEM) issued by a CA nobody trusts
    signing_key_pair(key, pub)                a bare EC key pair, not a certificate (the
                                              control plane's service-account token key)

What trustme's leaves carry (its CA.issue_cert): the IPs as IP SANs and the names as DNS
SANs (a client's: USER@users.invalid), the extended key usages serverAuth and clientAuth
(one certificate serves and authenticates, as the control plane's admin and serving
certificates need), CN and O as given, a validity from 2000 to 3000.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import trustme
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec


@dataclass(frozen=True)
class Issued:
    cert: Path  # PEM: the leaf
    key: Path   # PEM: its private key


class Authority:
    """A throw-away certificate authority."""

    def __init__(self) -> None:
        self._ca = trustme.CA()

    def write(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._ca.cert_pem.write_to_path(str(path))
        return path

    def issue(self, cert: Path, key: Path, *hosts: str, user: str | None = None,
              group: str | None = None) -> Issued:
        """A certificate for `hosts` (IP addresses or DNS names) and/or the client `user`
        in `group`, written to `cert` and `key`."""
        leaf = self._ca.issue_cert(*(hosts or _client_names(user)), common_name=user or hosts[0],
                                   organization_name=group)
        for path in (cert, key):
            path.parent.mkdir(parents=True, exist_ok=True)
        leaf.cert_chain_pems[0].write_to_path(str(cert))
        leaf.private_key_pem.write_to_path(str(key))
        return Issued(cert, key)


def _client_names(user: str | None) -> tuple[str, ...]:
    """The subject alternative name of a client certificate: trustme marks the extension
    critical, and Go (the apiserver, the kubelet) refuses a critical one that names nothing
    ("x509: unhandled critical extension"), so the user is named as an e-mail address."""
    if not user:
        raise ValueError("a certificate needs hosts or a user")
    return (f"{user}@users.invalid",)


def untrusted_client(user: str) -> tuple[bytes, bytes]:
    """(certificate PEM, key PEM) of client `user`, issued by a CA that is thrown away: no
    server trusts it."""
    leaf = trustme.CA().issue_cert(*_client_names(user), common_name=user)
    return leaf.cert_chain_pems[0].bytes(), leaf.private_key_pem.bytes()


def signing_key_pair(key: Path, pub: Path) -> None:
    """An EC P-256 private key (PKCS#8) and its public key (SubjectPublicKeyInfo), as PEM."""
    private = ec.generate_private_key(ec.SECP256R1())
    key.write_bytes(private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
    pub.write_bytes(private.public_key().public_bytes(serialization.Encoding.PEM,
                                                      serialization.PublicFormat.SubjectPublicKeyInfo))
