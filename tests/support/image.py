"""The images that scripts/image/build.sh builds without Docker (buildah, the project's
Dockerfile on a local Debian + tensorflow-cpu base), for tests that run them: the trainer
image (the Dockerfile's default target) and the serving image (its `serve` target).

``built_image(kind="trainer"|"serve")`` -> ``BuiltImage(reference, archive)``:
``reference`` is the image in podman's storage (``localhost/tfjob-trainer:<tag>``,
``localhost/tfjob-serve:<tag>``), ``archive`` its OCI archive (for ``ctr images import``
and ``podman load``). The tag follows the Dockerfile and what it installs (pyproject.toml,
LICENSE, trainer/, serve-requirements.lock), so a stale image is "missing". Missing FAILS
the test with the build command (never skips).
``package_version()``: the version pyproject.toml declares, which the image's installed
``tfjob-launcher`` distribution must have.
"""
from __future__ import annotations

import shutil
import subprocess
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.tools import ROOT, TOOL_TIMEOUT

BUILD_SCRIPT = ROOT / "scripts" / "image" / "build.sh"
BUILD_COMMAND = "scripts/image/build.sh (as root; scripts/test runs it)"


def package_version() -> str:
    """[project] version of pyproject.toml."""
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]


@dataclass(frozen=True)
class BuiltImage:
    reference: str  # localhost/tfjob-trainer:<tag>
    archive: Path  # OCI archive of `reference`; its index.json names it `reference`


PREFIXES = {"trainer": "", "serve": "SERVE_"}  # build.sh's output lines: IMAGE=, SERVE_IMAGE=, ...


def expected_image(kind: str = "trainer") -> BuiltImage:
    """What build.sh builds for the current Dockerfile and build context (`--print`: no build)."""
    out = subprocess.run(["bash", str(BUILD_SCRIPT), "--print"], capture_output=True, text=True,
                         timeout=TOOL_TIMEOUT, check=True).stdout
    values = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    prefix = PREFIXES[kind]
    return BuiltImage(reference=values[f"{prefix}IMAGE"], archive=Path(values[f"{prefix}ARCHIVE"]))


def built_image(in_podman: bool = True, kind: str = "trainer") -> BuiltImage:
    """The built image of `kind` (trainer, serve); fails the test when its archive (or,
    with `in_podman`, the image in podman's storage) is missing, naming the build command."""
    image = expected_image(kind)
    missing = [] if image.archive.is_file() else [f"OCI archive {image.archive}"]
    if in_podman:
        podman = shutil.which("podman")
        if podman is None:
            missing.append("podman (apt-get install podman)")
        elif subprocess.run([podman, "image", "exists", image.reference], capture_output=True,
                            timeout=TOOL_TIMEOUT, check=False).returncode != 0:
            missing.append(f"image {image.reference} in podman's storage")
    if missing:
        pytest.fail(f"{kind} image for this Dockerfile and build context is missing ({'; '.join(missing)}): "
                    f"build it with {BUILD_COMMAND}", pytrace=False)
    return image
