"""The image tier runs the images that scripts/image/build.sh built (buildah, the
project's Dockerfile unchanged, on a local Debian + tensorflow-cpu base) in real containers:
podman with runc, no network, no capabilities, read-only root, as uid 1000.

Fixtures: ``trainer_image`` and ``serve_image`` (session) -> ``BuiltImage``;
``run_container`` and ``run_serve_container`` -> a function ``run(*args, entrypoint=None,
user=..., volumes=(), env=None, timeout=..., detach=False)`` that runs one container of
that image to completion (bounded), or with ``detach`` starts it and returns its name (for
``container_exec``: ``podman exec``); every container is removed, also when the test fails
or times out.
"""
from __future__ import annotations

import contextlib
import shutil
import subprocess
import uuid
from typing import Callable, Iterator

import pytest

from tests.support.image import BuiltImage, built_image

# This host is cgroup hybrid: crun refuses it, runc runs. Without CAP_SYS_RESOURCE the
# default rlimits cannot be raised, so set them explicitly.
ULIMITS = ("--ulimit", "nofile=20000:20000", "--ulimit", "nproc=4096:4096")
HARDENING = ("--network", "none", "--read-only", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
             "--pull", "never")
RUN_TIMEOUT_S = 600


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/image/" in item.nodeid.replace("\\", "/"):
            item.add_marker(pytest.mark.image)


def pytest_configure(config):
    config.addinivalue_line("markers", "image: runs the trainer image in real containers (scripts/image/build.sh)")


def _tool(name: str, hint: str) -> str:
    found = shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin")
    if not found:
        pytest.fail(f"{name} not found on PATH; {hint}", pytrace=False)
    return found


@pytest.fixture(scope="session")
def trainer_image() -> BuiltImage:
    return built_image()


@pytest.fixture(scope="session")
def serve_image() -> BuiltImage:
    return built_image(kind="serve")


@contextlib.contextmanager
def _runner(image: BuiltImage) -> Iterator[Callable[..., subprocess.CompletedProcess]]:
    podman = _tool("podman", "apt-get install podman (scripts/image/build.sh does)")
    runc = _tool("runc", "apt-get install runc (scripts/image/build.sh does)")
    names: list[str] = []

    def run(*args: str, entrypoint: str | None = None, user: str | None = "1000:1000",
            volumes: tuple[str, ...] = (), env: dict[str, str] | None = None,
            timeout: float = RUN_TIMEOUT_S, detach: bool = False) -> subprocess.CompletedProcess:
        name = f"tfjob-image-test-{uuid.uuid4().hex[:8]}"
        names.append(name)
        command = [podman, "run", "--rm", "--name", name, "--runtime", runc, *ULIMITS, *HARDENING]
        if detach:
            command.append("--detach")
        if user is not None:
            command += ["--user", user]
        if entrypoint is not None:
            command += ["--entrypoint", entrypoint]
        for volume in volumes:
            command += ["--volume", volume]
        for key, value in (env or {}).items():
            command += ["--env", f"{key}={value}"]
        command += [image.reference, *args]
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
        if detach:
            assert done.returncode == 0, done.stderr
            done.stdout = name
        return done

    try:
        yield run
    finally:
        for name in names:  # --rm removes a container that exited; this one also a hung or detached one
            subprocess.run([podman, "rm", "--force", "--ignore", "--time", "0", name],
                           capture_output=True, timeout=120, check=False)


@pytest.fixture()
def run_container(trainer_image) -> Iterator[Callable[..., subprocess.CompletedProcess]]:
    with _runner(trainer_image) as run:
        yield run


@pytest.fixture()
def run_serve_container(serve_image) -> Iterator[Callable[..., subprocess.CompletedProcess]]:
    with _runner(serve_image) as run:
        yield run


@pytest.fixture()
def container_exec() -> Callable[..., subprocess.CompletedProcess]:
    """`podman exec NAME ARGS` in a running container (its own user), bounded."""
    podman = _tool("podman", "apt-get install podman (scripts/image/build.sh does)")

    def run(name: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run([podman, "exec", name, *args], capture_output=True, text=True, timeout=timeout,
                              check=False)
    return run
