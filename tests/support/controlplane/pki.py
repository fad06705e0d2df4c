"""Certificates and kubeconfig of the e2e control plane (tests/support/controlplane/):
one throw-away CA signs a serving certificate for 127.0.0.1/localhost (apiserver, KWOK's
kubelet endpoint, the operator's webhook server) and an admin client certificate in the
group system:masters; plus the service-account signing key pair."""
from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


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


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))


def _issue(subject: x509.Name, key, issuer: x509.Name, issuer_key, extensions) -> bytes:
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(hours=1))
               .not_valid_after(now + datetime.timedelta(days=2)))
    for extension, critical in extensions:
        builder = builder.add_extension(extension, critical=critical)
    return builder.sign(issuer_key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM)


def make_pki(directory: Path, extra_ips: tuple[str, ...] = ()) -> Pki:
    """`extra_ips`: more addresses the serving certificate covers (a real node's IP: its
    kubelet serves it, and the apiserver checks it when it proxies `kubectl logs`)."""
    directory.mkdir(parents=True, exist_ok=True)
    pki = Pki(*(directory / name for name in (
        "ca.crt", "serving.crt", "serving.key", "admin.crt", "admin.key", "sa.key", "sa.pub")))
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "e2e-control-plane-ca")])
    pki.ca.write_bytes(_issue(ca_name, ca_key, ca_name, ca_key, [
        (x509.BasicConstraints(ca=True, path_length=None), True)]))
    leaves = {
        (pki.serving_cert, pki.serving_key): (
            [x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")], ExtendedKeyUsageOID.SERVER_AUTH,
            [x509.SubjectAlternativeName([*(x509.IPAddress(ipaddress.ip_address(ip))
                                            for ip in ("127.0.0.1", *extra_ips)),
                                          x509.DNSName("localhost")])]),
        (pki.admin_cert, pki.admin_key): (
            [x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:masters"),
             x509.NameAttribute(NameOID.COMMON_NAME, "e2e-admin")], ExtendedKeyUsageOID.CLIENT_AUTH, []),
    }
    for (cert_path, key_path), (name, usage, extra) in leaves.items():
        key = ec.generate_private_key(ec.SECP256R1())
        cert_path.write_bytes(_issue(x509.Name(name), key, ca_name, ca_key, [
            (x509.BasicConstraints(ca=False, path_length=None), True),
            (x509.ExtendedKeyUsage([usage]), False), *((e, False) for e in extra)]))
        _write_key(key_path, key)
    sa_key = ec.generate_private_key(ec.SECP256R1())
    _write_key(pki.sa_key, sa_key)
    pki.sa_pub.write_bytes(sa_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
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


