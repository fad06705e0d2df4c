"""The project as a user installs it: the wheel and sdist built from the checkout with
`python -m build` (fixture `dists`, once per session) and new virtual environments to
install them into (`new_venv`), run from a directory outside the checkout with an
environment that cannot reach the checkout (no PYTHONPATH, no $TFJOB_CRD, no cluster).
"""
from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from email.parser import HeaderParser
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
BUILD_TIMEOUT = 600.0
INSTALL_TIMEOUT = 1200.0  # a TensorFlow wheel is about 250 MB
# what a user's shell has that would let a command see the checkout or a cluster
_DROPPED = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "TFJOB_CRD", "KUBECONFIG", "PYTHONSTARTUP")


@dataclass(frozen=True)
class Dists:
    wheel: Path
    sdist: Path


def _run(argv: list, timeout: float, **kwargs) -> subprocess.CompletedProcess:
    done = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=timeout, **kwargs)
    assert done.returncode == 0, f"{' '.join(map(str, argv))} failed ({done.returncode}):\n" \
                                 f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="session")
def dists(tmp_path_factory) -> Dists:
    """sdist, then the wheel built from that sdist (`python -m build`'s default)."""
    out = tmp_path_factory.mktemp("dist")
    _run([sys.executable, "-m", "build", "--outdir", out, ROOT], BUILD_TIMEOUT)
    wheels, sdists = sorted(out.glob("*.whl")), sorted(out.glob("*.tar.gz"))
    assert len(wheels) == 1 and len(sdists) == 1, sorted(out.iterdir())
    return Dists(wheels[0], sdists[0])


def metadata(wheel: Path):
    """The wheel's METADATA as an email.message.Message (`get_all("Requires-Dist")`, ...)."""
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        return HeaderParser().parsestr(archive.read(name).decode())


def base_requirements(wheel: Path) -> list[Requirement]:
    """What `pip install WHEEL` installs with it: the Requires-Dist entries without an extra."""
    return [req for req in map(Requirement, metadata(wheel).get_all("Requires-Dist") or [])
            if req.marker is None or "extra" not in str(req.marker)]


def lowest_pins(wheel: Path) -> list[str]:
    """`name==X` for each base requirement's `>=X`: the oldest versions its bounds let pip
    choose, which the code must work with (a requirement without such a bound fails here)."""
    pins = []
    for req in base_requirements(wheel):
        floors = [spec.version for spec in req.specifier if spec.operator == ">="]
        assert len(floors) == 1, f"{req}: no lower bound (>=) to install it at"
        pins.append(f"{req.name}=={floors[0]}")
    return pins


@dataclass(frozen=True)
class Venv:
    """A new virtual environment; `run` executes its commands from `home`, outside the checkout."""

    path: Path
    home: Path

    def bin(self, name: str) -> Path:
        return self.path / "bin" / name

    @property
    def python(self) -> Path:
        return self.bin("python")

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in _DROPPED}
        env.update(PATH=f"{self.path / 'bin'}{os.pathsep}{env.get('PATH', '')}",
                   KUBECONFIG=str(self.home / "no-kubeconfig"), HOME=str(self.home),
                   TFJOB_RUNS_DIR=str(self.home / "runs"), XDG_CACHE_HOME=str(self.home / ".cache"))
        env.update(extra)
        return env

    def run(self, *argv: str, timeout: float = 300.0, **extra_env: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(a) for a in argv], cwd=self.home, env=self.env(**extra_env),
                              capture_output=True, text=True, timeout=timeout)

    def pip_install(self, *requirements: str) -> None:
        _run([self.python, "-m", "pip", "install", "--quiet", *requirements], INSTALL_TIMEOUT,
             cwd=self.home, env=self.env())


def new_venv(path: Path) -> Venv:
    """`python -m venv` at path/venv (with pip); its home is path/home (a directory outside the checkout)."""
    home = path / "home"
    home.mkdir(parents=True)
    assert ROOT not in home.resolve().parents
    env = {k: v for k, v in os.environ.items() if k not in _DROPPED}
    _run([sys.executable, "-m", "venv", path / "venv"], 300.0, env=env)
    return Venv(path / "venv", home)
