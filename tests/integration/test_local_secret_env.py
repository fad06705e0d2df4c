"""--secret-env on the local backend (real supervisor and replica processes): the replica
gets the value from the submitting environment or from $TFJOB_LOCAL_SECRETS_DIR/SECRET/KEY,
and no file of the run folder (manifest.yaml, plan.json, status.json, logs) contains it.
The replica checks the value against its SHA-256, so not even its command line holds it."""
from __future__ import annotations

import hashlib
import secrets
from pathlib import Path

import pytest

from launcher.backends.base import BackendError
from launcher.backends.local import LocalBackend
from launcher.render import render
from launcher.spec import JobSpec, ReplicaSpec, SecretEnv
from tests.support.polling import wait_for

CHECK = ("import hashlib, os, sys; v = os.environ.get('HF_TOKEN', ''); "
         "print('token present:', bool(v)); sys.exit(0 if hashlib.sha256(v.encode()).hexdigest() == sys.argv[1] else 3)")


def job(value: str) -> dict:
    spec = JobSpec(name="with-secret", replicas={"Worker": ReplicaSpec(2)},
                   command=("python", "-c", CHECK, hashlib.sha256(value.encode()).hexdigest()),
                   secret_env=(SecretEnv("HF_TOKEN", "hf-token", "token"),))
    return render(spec)


def run(backend: LocalBackend, tfjob: dict) -> str:
    try:
        backend.submit(tfjob)
        return wait_for(lambda: (phase := backend.status("with-secret", "default").phase) in ("Succeeded", "Failed")
                        and phase, "the job to finish", 60)
    finally:
        backend.stop("with-secret", "default")


def files_containing(root: Path, value: str) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and value.encode() in p.read_bytes()]


@pytest.fixture
def value() -> str:
    return "hf_" + secrets.token_hex(16)


def test_value_from_the_environment(tmp_path, monkeypatch, value):
    monkeypatch.setenv("HF_TOKEN", value)
    monkeypatch.setenv("TFJOB_LOCAL_SECRETS_DIR", str(tmp_path / "no-secrets"))
    backend = LocalBackend(runs_dir=str(tmp_path / "runs"), note=lambda line: None)
    assert run(backend, job(value)) == "Succeeded"
    assert files_containing(tmp_path / "runs", value) == []
    assert (tmp_path / "runs" / "default" / "with-secret" / "plan.json").read_text().count("hf-token") == 2


def test_value_from_the_secrets_dir(tmp_path, monkeypatch, value):
    monkeypatch.delenv("HF_TOKEN", raising=False)
    secret = tmp_path / "secrets" / "hf-token" / "token"
    secret.parent.mkdir(parents=True)
    secret.write_text(value + "\n")
    monkeypatch.setenv("TFJOB_LOCAL_SECRETS_DIR", str(tmp_path / "secrets"))
    backend = LocalBackend(runs_dir=str(tmp_path / "runs"), note=lambda line: None)
    assert run(backend, job(value)) == "Succeeded"
    assert files_containing(tmp_path / "runs", value) == []


def test_no_value_anywhere_refuses_the_job_and_starts_nothing(tmp_path, monkeypatch, value):
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("TFJOB_LOCAL_SECRETS_DIR", str(tmp_path / "secrets"))
    backend = LocalBackend(runs_dir=str(tmp_path / "runs"), note=lambda line: None)
    with pytest.raises(BackendError) as err:
        backend.submit(job(value))
    assert "export HF_TOKEN" in str(err.value) and str(tmp_path / "secrets" / "hf-token" / "token") in str(err.value)
    assert not (tmp_path / "runs").exists()
