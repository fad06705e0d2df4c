"""The trainer image: Dockerfile facts, hadolint, .dockerignore, and its ENTRYPOINT run
without Docker from a directory laid out as the image's (only trainer/ copied in)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.support.tools import ROOT, TOOL_TIMEOUT, hadolint

DOCKERFILE = ROOT / "Dockerfile"
BASE_IMAGE = "tensorflow/tensorflow:2.21.0"
ENTRYPOINT = ["python", "-m", "trainer.task"]


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order, continuation lines joined, comments dropped."""
    result, pending = [], ""
    for line in DOCKERFILE.read_text(encoding="utf-8").splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        pending += line.rstrip("\\").strip() + " "
        if not line.endswith("\\"):
            keyword, _, rest = pending.strip().partition(" ")
            result.append((keyword.upper(), rest.strip()))
            pending = ""
    return result


def values_of(keyword: str) -> list[str]:
    return [rest for key, rest in instructions() if key == keyword]


def test_hadolint_is_clean():
    done = subprocess.run([hadolint(), "--no-color", str(DOCKERFILE)], capture_output=True, text=True,
                          timeout=TOOL_TIMEOUT, check=False)
    assert done.returncode == 0 and not done.stdout.strip(), done.stdout + done.stderr


def test_base_image_is_tensorflow_2_21_with_a_gpu_build_argument():
    steps = instructions()
    assert steps[0] == ("ARG", f"BASE_IMAGE={BASE_IMAGE}")
    assert values_of("FROM") == ["${BASE_IMAGE}"]
    assert "2.21.0-gpu" in DOCKERFILE.read_text(encoding="utf-8")  # documented GPU build


def test_image_holds_trainer_only_and_runs_it_as_uid_1000():
    assert values_of("COPY") == ["trainer/ /app/trainer/"]
    assert values_of("ADD") == []
    assert values_of("WORKDIR") == ["/app"]
    assert "TRAINER_UID=1000" in values_of("ARG") and "TRAINER_GID=1000" in values_of("ARG")
    assert values_of("USER") == ["${TRAINER_UID}:${TRAINER_GID}"]
    assert [key for key, _ in instructions()][-1] == "ENTRYPOINT"
    assert [json.loads(rest) for rest in values_of("ENTRYPOINT")] == [ENTRYPOINT]
    assert values_of("CMD") == []  # empty TFJob args must run the trainer, not a default CMD
    env = " ".join(values_of("ENV"))
    assert "PYTHONPATH=/app" in env and "PYTHONUNBUFFERED=1" in env


def test_dockerignore_sends_only_trainer():
    lines = [line.strip() for line in (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
             if line.strip() and not line.startswith("#")]
    assert lines[:2] == ["*", "!trainer/"]
    assert not [line for line in lines[2:] if line.startswith("!")]


@pytest.fixture()
def image_layout(tmp_path):
    """/app as the image has it: a copy of trainer/ only (no launcher, no tests)."""
    task = ROOT / "trainer" / "task.py"
    if not task.is_file():
        pytest.fail(f"{task} is missing: the image ENTRYPOINT python -m trainer.task has nothing to run",
                    pytrace=False)
    app = tmp_path / "app"
    shutil.copytree(ROOT / "trainer", app / "trainer", ignore=shutil.ignore_patterns("__pycache__"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env.update(PYTHONPATH=str(app), PYTHONDONTWRITEBYTECODE="1", PYTHONUNBUFFERED="1", HOME=str(tmp_path))
    return app, env


def test_entrypoint_runs_from_the_image_layout(image_layout):
    app, env = image_layout
    command = [sys.executable if part == "python" else part for part in ENTRYPOINT] + ["--help"]
    done = subprocess.run(command, cwd=app, env=env, capture_output=True, text=True, timeout=TOOL_TIMEOUT,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert "usage:" in done.stdout and "--job-dir" in done.stdout, done.stdout


def test_trainer_in_the_image_needs_nothing_but_itself(image_layout):
    app, env = image_layout
    probe = ("import sys, trainer.task; print(trainer.task.__file__); "
             "print(sorted(m for m in sys.modules if m.split('.')[0] in ('launcher', 'tests')))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=app, env=env, capture_output=True, text=True,
                          timeout=TOOL_TIMEOUT, check=False)
    assert done.returncode == 0, done.stderr
    module_file, foreign = done.stdout.strip().splitlines()[-2:]
    assert module_file.startswith(str(app / "trainer")), module_file
    assert foreign == "[]", f"trainer.task imports {foreign}; the image holds trainer/ only"
