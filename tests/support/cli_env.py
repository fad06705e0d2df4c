"""Fixtures for launcher CLI tests (registered in tests/conftest.py).

`cli_env` (a module asks for it with `pytestmark = pytest.mark.usefixtures("cli_env")`,
so that every test in it has it) unsets $TFJOB_CRD, so the launcher validates with the
TFJob CRD packaged with it (`CRD`, training-operator's own file), points it at a
per-session schema cache, and points $MNIST_DATA_DIR / $TAXI_DATA_DIR at directories
holding a `train-*` file: a local submit checks that its data is there (the CLI tests
use test-double backends, which read nothing), whatever the checkout holds. `cli` runs `python -m launcher` in-process and returns the
exit code, stdout and stderr.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from launcher.schemas import packaged_path

CRD = packaged_path("tfjob")


@dataclass
class Result:
    code: int
    out: str
    err: str

    def manifest(self) -> dict:
        return yaml.safe_load(self.out)

    def refused(self, field: str) -> str:
        """Bad input: exit 2, nothing on stdout, one `error: FIELD: ...` line; returns it."""
        assert self.code == 2, self
        assert self.out == ""
        lines = self.err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"error: {field}: "), self.err
        return lines[0]


@pytest.fixture(scope="session")
def schema_cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("xdg-cache")


@pytest.fixture(scope="session")
def data_dirs(tmp_path_factory) -> dict[str, str]:
    dirs = {}
    for variable in ("MNIST_DATA_DIR", "TAXI_DATA_DIR"):
        path = tmp_path_factory.mktemp(variable.lower())
        (path / "train-00000-of-00001.tfrecord").write_bytes(b"")
        dirs[variable] = str(path)
    return dirs


@pytest.fixture
def cli_env(monkeypatch, schema_cache, data_dirs):
    monkeypatch.delenv("TFJOB_CRD", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(schema_cache))
    for variable, path in data_dirs.items():
        monkeypatch.setenv(variable, path)


@pytest.fixture
def cli(capsys):
    from launcher.cli import main

    def run(*argv: str, backend=None) -> Result:
        factory = (lambda kind: backend) if backend is not None else None
        code = main(list(argv), backend_factory=factory)
        out, err = capsys.readouterr()
        return Result(code, out, err)

    return run
