"""The wheel and sdist built from the checkout (`python -m build`): valid metadata (twine
check), the console script, the extras, and the package data the launcher reads at run
time (the Jinja templates of the TFJob, the NetworkPolicy and the KServe InferenceService,
the TFJob and InferenceService CRD schemas and their origin records), and nothing of the
checkout beside the two packages (no tests, data, caches or stray files); the README's
Install names the wheel and the extras these are."""
from __future__ import annotations

import re
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from launcher import schemas
from tests.support.packaging import Dists, metadata

pytestmark = pytest.mark.packaging
ROOT = Path(__file__).resolve().parents[2]
# named here, so that a file dropped from the package data (or from schemas.SCHEMAS) fails
TEMPLATES = ("tfjob.yaml.j2", "networkpolicy.yaml.j2", "inferenceservice.yaml.j2")
CRDS = ("kubeflow.org_tfjobs.yaml", "serving.kserve.io_inferenceservices.yaml")  # TFJob, KServe InferenceService
PACKAGE_DATA = sorted(
    {f"launcher/templates/{name}" for name in TEMPLATES}
    | {f"launcher/templates/{path.name}" for path in (ROOT / "launcher" / "templates").glob("*.j2")}
    | {f"launcher/schemas/{name}{suffix}" for name in {*CRDS, *(s.file for s in schemas.SCHEMAS.values())}
       for suffix in ("", ".origin.json")})


def test_twine_check_passes(dists: Dists):
    done = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", str(dists.wheel), str(dists.sdist)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("PASSED") == 2


def test_wheel_holds_templates_schemas_and_the_console_script(dists: Dists):
    with zipfile.ZipFile(dists.wheel) as wheel:
        names = set(wheel.namelist())
        meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
        metadata = wheel.read(meta).decode()
        entry_points = wheel.read(meta.replace("METADATA", "entry_points.txt")).decode()
    assert set(PACKAGE_DATA) <= names, sorted(set(PACKAGE_DATA) - names)
    assert any(n.startswith("launcher/backends/k8s/") for n in names) and "trainer/task.py" in names  # no dir entries
    assert "tfjob = launcher.__main__:run" in entry_points
    requires = [line for line in metadata.splitlines() if line.startswith("Requires-Dist:")]
    base = [line for line in requires if "extra ==" not in line]
    assert base and not any("tensorflow" in line or "tensorboard" in line for line in base), base
    assert any(line.startswith("Requires-Dist: tensorflow-cpu") and "extra == \"trainer\"" in line for line in requires)
    assert trainer_tensorflow(requires, "linux", "x86_64") == ["tensorflow-cpu"]
    assert any("tfjob-launcher[trainer]" in line and "extra == \"local\"" in line for line in requires)
    assert not any("google-cloud-storage" in line for line in base), base  # gs:// for predict is the [gcs] extra
    assert any(line.startswith("Requires-Dist: google-cloud-storage") and "extra == \"gcs\"" in line
               for line in requires)
    assert any("tfjob-launcher[gcs]" in line and "extra == \"serve\"" in line for line in requires)


def trainer_tensorflow(requires: list[str], sys_platform: str, machine: str) -> list[str]:
    """The TensorFlow distributions the [trainer] extra installs on that platform."""
    from packaging.requirements import Requirement

    env = {"sys_platform": sys_platform, "platform_machine": machine, "extra": "trainer"}
    reqs = [Requirement(line.removeprefix("Requires-Dist:").strip()) for line in requires]
    return sorted(req.name for req in reqs if req.name.startswith("tensorflow") and req.marker is not None
                  and req.marker.evaluate(env))


@pytest.mark.parametrize("sys_platform, machine, wanted", [
    ("linux", "x86_64", "tensorflow-cpu"), ("win32", "AMD64", "tensorflow-cpu"),
    # tensorflow-cpu 2.21 has no wheel there (PyPI: manylinux x86_64 and win_amd64 only): pip
    # install of the extra failed on Graviton, in containers on Apple silicon and on macOS
    ("linux", "aarch64", "tensorflow"), ("darwin", "arm64", "tensorflow")])
def test_the_trainer_extra_installs_one_tensorflow_with_wheels_for_the_platform(dists: Dists, sys_platform, machine,
                                                                                   wanted):
    requires = metadata(dists.wheel).get_all("Requires-Dist")
    assert trainer_tensorflow(requires, sys_platform, machine) == [wanted]


def test_sdist_holds_templates_and_schemas(dists: Dists):
    with tarfile.open(dists.sdist) as sdist:
        names = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
    assert set(PACKAGE_DATA) <= names, sorted(set(PACKAGE_DATA) - names)
    assert {"pyproject.toml", "README.md", "LICENSE"} <= names


def package_files() -> set[str]:
    """The two packages' modules in the checkout and their package data: what each dist holds
    of the checkout's files, all of it (a stray file in a package-data folder, a test or a
    cache picked up by a glob is shipped to every user)."""
    modules = {path.relative_to(ROOT).as_posix() for package in ("launcher", "trainer")
               for path in (ROOT / package).rglob("*.py") if "__pycache__" not in path.parts}
    return modules | set(PACKAGE_DATA)


def test_the_dists_hold_the_packages_and_nothing_else(dists: Dists):
    with zipfile.ZipFile(dists.wheel) as wheel:
        names = {name for name in wheel.namelist() if ".dist-info/" not in name}
    assert names == package_files(), (sorted(names - package_files()), sorted(package_files() - names))
    with tarfile.open(dists.sdist) as sdist:
        files = {member.name.split("/", 1)[1] for member in sdist.getmembers() if member.isfile()}
    built = {"PKG-INFO", "setup.cfg"} | {name for name in files if name.startswith("tfjob_launcher.egg-info/")}
    expected = package_files() | {"pyproject.toml", "README.md", "LICENSE"}
    assert files - built == expected, (sorted(files - built - expected), sorted(expected - files))


def test_the_readme_install_names_the_wheel_and_extras_there_are(dists: Dists):
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    install = readme[readme.index("\n## Install\n"):readme.index("\n## ", readme.index("\n## Install\n") + 1)]
    assert set(re.findall(r"dist/(tfjob_launcher-\S+?\.whl)", install)) == {dists.wheel.name}
    assert set(re.findall(r"dist/(tfjob_launcher-\S+?\.tar\.gz)", install)) == {dists.sdist.name}
    named = set(re.findall(r"(?:\.whl|tfjob-launcher|\.)\[(\w+)\]", install))
    assert {"local", "serve", "gcs", "trainer"} <= named, named
    assert named <= set(metadata(dists.wheel).get_all("Provides-Extra")), named
