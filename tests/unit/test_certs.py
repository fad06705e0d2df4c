"""tests/support/certs.py (trustme) as the control plane uses it (controlplane/pki.py):
what the apiserver, the kubelets and the webhook server need of the certificates, read
back with `cryptography` and checked by real TLS handshakes (Python's OpenSSL) between a
server presenting the serving certificate and a client presenting the admin one."""
from __future__ import annotations

import ipaddress
import socket
import ssl
import threading
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tests.support.certs import untrusted_client
from tests.support.controlplane.pki import Pki, make_pki

NODE_IP = "10.88.0.2"  # the node tier's kubelet address, covered by the serving certificate


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"), (NODE_IP,))


def load(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def usages(cert: x509.Certificate) -> list:
    return list(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value)


def test_the_serving_certificate_covers_loopback_localhost_and_the_node_ip(pki):
    cert = load(pki.serving_cert)
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert set(names.get_values_for_type(x509.IPAddress)) == {ipaddress.ip_address("127.0.0.1"),
                                                             ipaddress.ip_address(NODE_IP)}
    assert names.get_values_for_type(x509.DNSName) == ["localhost"]
    assert ExtendedKeyUsageOID.SERVER_AUTH in usages(cert)
    assert cert.issuer == load(pki.ca).subject


def test_the_admin_certificate_is_user_e2e_admin_in_system_masters(pki):
    cert = load(pki.admin_cert)
    # Kubernetes' x509 authenticator: CN is the user name, each O a group
    assert [a.value for a in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)] == ["e2e-admin"]
    assert [a.value for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)] == ["system:masters"]
    assert ExtendedKeyUsageOID.CLIENT_AUTH in usages(cert)


def test_no_certificate_has_a_critical_extension_go_would_refuse(pki):
    """Go's x509 (apiserver, kubelet, webhook clients) handles a critical subject
    alternative name only when it names something; an empty one is "x509: unhandled
    critical extension" and the certificate is refused."""
    for path in (pki.ca, pki.serving_cert, pki.admin_cert):
        for extension in load(path).extensions:
            if isinstance(extension.value, x509.SubjectAlternativeName):
                assert list(extension.value), (path.name, extension)


def test_the_service_account_key_pair_matches(pki):
    private = serialization.load_pem_private_key(pki.sa_key.read_bytes(), password=None)
    public = serialization.load_pem_public_key(pki.sa_pub.read_bytes())
    assert private.public_key().public_numbers() == public.public_numbers()


def handshake(pki: Pki, host: str, client_cert: tuple[Path, Path]) -> tuple[str | None, str | None]:
    """A TLS handshake over a socket pair: the server presents the serving certificate and
    requires a client certificate issued by the CA; the client checks the server for `host`.
    Returns (the client's error, the server's error), None where it succeeded."""
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(pki.ca))
    server_ctx.load_cert_chain(str(pki.serving_cert), str(pki.serving_key))
    server_ctx.verify_mode = ssl.CERT_REQUIRED
    client_ctx = ssl.create_default_context(cafile=str(pki.ca))
    client_ctx.load_cert_chain(str(client_cert[0]), str(client_cert[1]))
    errors: dict[str, str | None] = {"client": None, "server": None}
    left, right = socket.socketpair()
    left.settimeout(30)
    right.settimeout(30)

    def serve() -> None:
        try:
            with server_ctx.wrap_socket(right, server_side=True) as tls:
                tls.recv(1)
        except (ssl.SSLError, OSError) as error:
            errors["server"] = str(error)

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        with client_ctx.wrap_socket(left, server_hostname=host) as tls:
            tls.sendall(b"x")
    except (ssl.SSLError, OSError) as error:
        errors["client"] = str(error)
    finally:
        left.close()
        thread.join(timeout=30)
        right.close()
    return errors["client"], errors["server"]


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", NODE_IP])
def test_a_client_with_the_admin_certificate_and_the_ca_reaches_the_server(pki, host):
    assert handshake(pki, host, (pki.admin_cert, pki.admin_key)) == (None, None)


def test_a_host_the_serving_certificate_does_not_cover_is_refused(pki):
    client, _ = handshake(pki, "10.88.0.3", (pki.admin_cert, pki.admin_key))
    assert client and "IP address mismatch" in client


def test_a_client_certificate_of_another_ca_is_refused(pki, tmp_path):
    cert, key = untrusted_client("not-trusted-user")
    (tmp_path / "c.crt").write_bytes(cert)
    (tmp_path / "c.key").write_bytes(key)
    _, server = handshake(pki, "127.0.0.1", (tmp_path / "c.crt", tmp_path / "c.key"))
    assert server and "certificate verify failed" in server
