"""--secret-env on the local backend: where a Secret's value comes from on this machine.

A container env entry with valueFrom.secretKeyRef {name: SECRET, key: KEY} for variable
NAME takes, in order: NAME from the environment of the launcher that submits the job
(the supervisor and the replicas inherit it), else the file
$TFJOB_LOCAL_SECRETS_DIR/SECRET/KEY (default ~/.config/tfjob-launcher/secrets/SECRET/KEY,
the layout of a Secret mounted as a volume). Only the reference (NAME, SECRET, KEY) is
written to the run folder (manifest.yaml, plan.json); the value is read when a replica
starts and exists only in that replica's environment.
"""
from __future__ import annotations

from pathlib import Path

SECRETS_ENV = "TFJOB_LOCAL_SECRETS_DIR"


def secrets_dir(environ: dict) -> Path:
    configured = environ.get(SECRETS_ENV)
    if configured:
        return Path(configured).expanduser()
    return Path.home() / ".config" / "tfjob-launcher" / "secrets"


def secret_refs(container: dict) -> list[dict]:
    """[{"name", "secret", "key"}] of a container's env entries from Secrets."""
    refs = []
    for entry in container.get("env") or []:
        ref = (entry.get("valueFrom") or {}).get("secretKeyRef")
        if ref:
            refs.append({"name": entry["name"], "secret": ref["name"], "key": ref["key"]})
    return refs


def secret_file(ref: dict, environ: dict) -> Path:
    return secrets_dir(environ) / ref["secret"] / ref["key"]


def resolve(ref: dict, environ: dict) -> str | None:
    """The value for `ref`: from the environment, else from its file; None if neither."""
    if ref["name"] in environ:
        return environ[ref["name"]]
    try:
        return secret_file(ref, environ).read_text().rstrip("\n")
    except (OSError, UnicodeDecodeError):
        return None


def unresolved(refs: list[dict], environ: dict) -> str | None:
    """One line naming the first secret that has no value here and how to give it one."""
    for ref in refs:
        if resolve(ref, environ) is None:
            return (f"--secret-env {ref['name']}={ref['secret']}:{ref['key']}: the local backend found no value; "
                    f"export {ref['name']} or write the value to {secret_file(ref, environ)}")
    return None
