"""The CRD schemas packaged with the launcher: each is the pinned Go module's own file,
with a truthful origin record (scripts/crds/update.py writes both)."""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from launcher import schemas

REPO = Path(__file__).resolve().parents[2]
VERSIONS = REPO / "scripts" / "controlplane" / "versions.env"
VERSION_VARS = {"github.com/kubeflow/training-operator": "TRAINING_OPERATOR_VERSION"}


def pinned(variable: str) -> str:
    for line in VERSIONS.read_text().splitlines():
        if line.startswith(f"{variable}="):
            return line.split("=", 1)[1].strip()
    raise AssertionError(f"{variable} not in {VERSIONS}")


def go_mod_cache() -> Path:
    if os.environ.get("GOMODCACHE"):
        return Path(os.environ["GOMODCACHE"])
    if shutil.which("go"):
        done = subprocess.run(["go", "env", "GOMODCACHE"], capture_output=True, text=True, timeout=60)
        if done.returncode == 0 and done.stdout.strip():
            return Path(done.stdout.strip())
    return Path.home() / "go" / "pkg" / "mod"


@pytest.mark.parametrize("name", sorted(schemas.SCHEMAS))
def test_packaged_copy_matches_its_origin_record(name):
    record = schemas.origin(name)
    packaged = schemas.packaged_path(name)
    assert hashlib.sha256(packaged.read_bytes()).hexdigest() == record["sha256"]
    assert record["version"] == pinned(VERSION_VARS[record["module"]]), \
        "versions.env pins another version: run scripts/crds/update.py"


@pytest.mark.parametrize("name", sorted(schemas.SCHEMAS))
def test_packaged_copy_equals_the_file_in_the_go_module(name):
    record = schemas.origin(name)
    source = go_mod_cache() / f"{record['module']}@{record['version']}" / record["path"]
    if not source.is_file():
        pytest.skip(f"{record['module']}@{record['version']} is not in the Go module cache "
                    "(scripts/controlplane/build.sh or scripts/crds/update.py puts it there)")
    assert schemas.packaged_path(name).read_bytes() == source.read_bytes()


def test_update_script_check_agrees_when_go_is_available():
    if not shutil.which("go"):
        pytest.skip("no go on PATH")
    done = subprocess.run([str(REPO / "scripts" / "crds" / "update.py"), "--check"], capture_output=True,
                          text=True, timeout=600, env={**os.environ, "GOFLAGS": "-mod=mod", "GOPROXY": "off"})
    if "failed" in done.stderr and done.returncode != 0:
        pytest.skip(f"module not in the Go cache: {done.stderr.strip()}")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "up to date" in done.stdout


def test_each_schema_is_the_crd_it_names():
    import yaml

    for name, info in schemas.SCHEMAS.items():
        crd = yaml.safe_load(schemas.packaged_path(name).read_text())
        assert crd["kind"] == "CustomResourceDefinition" and crd["metadata"]["name"] == info.crd_name
        assert crd["spec"]["names"]["kind"] == info.kind
        assert any(v["name"] == info.version for v in crd["spec"]["versions"])
