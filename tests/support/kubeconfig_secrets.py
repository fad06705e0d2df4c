"""Kubeconfigs full of credentials, for tests that check no error ever prints them.

`Secrets` holds a bearer token, a client key (a real EC key, PEM and base64), a basic-auth
password and what an exec credential plugin prints; `kubeconfig(...)` writes a kubeconfig
whose user carries some of them (a token, a client key, or an exec plugin), and `leaks`
lists which secret (or a recognisable piece of it) appears in some output."""
from __future__ import annotations

import base64
import json
import secrets
import stat
import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from tests.support.certs import untrusted_client


@dataclass
class Secrets:
    token: str = field(default_factory=lambda: "tok-" + secrets.token_hex(16))
    password: str = field(default_factory=lambda: "pw-" + secrets.token_hex(12))
    plugin_secret: str = field(default_factory=lambda: "plugin-" + secrets.token_hex(12))
    cert_pem: bytes = b""
    key_pem: bytes = b""

    def __post_init__(self) -> None:
        self.cert_pem, self.key_pem = untrusted_client("not-trusted-user")

    def pieces(self) -> dict[str, str]:
        key_lines = [line for line in self.key_pem.decode().splitlines() if "-----" not in line]
        return {"token": self.token, "password": self.password, "plugin output": self.plugin_secret,
                "client key (base64)": base64.b64encode(self.key_pem).decode()[:40],
                **{f"client key line {i}": line for i, line in enumerate(key_lines)}}

    def leaks(self, output: str) -> list[str]:
        return [name for name, piece in self.pieces().items() if piece in output]


def exec_plugin(directory: Path, secret: str, exit_code: int) -> Path:
    """A credential plugin that prints `secret` on stdout and stderr and exits `exit_code`
    (0: a valid ExecCredential whose token is `secret`)."""
    directory.mkdir(parents=True, exist_ok=True)
    script = directory / "cred-plugin"
    credential = {"apiVersion": "client.authentication.k8s.io/v1beta1", "kind": "ExecCredential",
                  "status": {"token": secret}}
    script.write_text(f"#!{sys.executable}\nimport sys\n"
                      f"print('debug: minted {secret}', file=sys.stderr)\n"
                      f"print({json.dumps(credential)!r} if {exit_code} == 0 else 'raw {secret}')\n"
                      f"sys.exit({exit_code})\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def kubeconfig(path: Path, server: str, user: dict, ca: Path | None = None, context: str = "ctx") -> Path:
    cluster = {"server": server, **({"certificate-authority": str(ca)} if ca else {})}
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": context,
        "clusters": [{"name": "c", "cluster": cluster}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": context, "context": {"cluster": "c", "user": "u", "namespace": "default"}}],
    }))
    return path


def users(s: Secrets, directory: Path) -> dict[str, dict]:
    """Kubeconfig users, one per kind of credential."""
    return {
        "token": {"token": s.token},
        "password": {"username": "admin", "password": s.password},
        "client key": {"client-certificate-data": base64.b64encode(s.cert_pem).decode(),
                       "client-key-data": base64.b64encode(s.key_pem).decode()},
        "exec plugin failing": _exec(exec_plugin(directory, s.plugin_secret, 1)),
        "exec plugin token": _exec(exec_plugin(directory / "ok", s.plugin_secret, 0)),
    }


def _exec(command: Path) -> dict:
    return {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": str(command),
                     "interactiveMode": "Never"}}
