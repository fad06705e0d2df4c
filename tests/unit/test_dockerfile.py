"""The trainer image and the serving image: Dockerfile facts (stages, the serving image's
hash-pinned wheels), hadolint, .dockerignore, and the trainer's ENTRYPOINT run without
Docker from the project installed as the image installs it (pip, from the sources the
Dockerfile names: pyproject.toml, LICENSE and trainer/, no launcher)."""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib

import pytest

from tests.support.image import package_version
from tests.support.tools import ROOT, TOOL_TIMEOUT, hadolint

DOCKERFILE = ROOT / "Dockerfile"
SERVE_LOCK = ROOT / "serve-requirements.lock"
BASE_IMAGE = "tensorflow/tensorflow:2.21.0"
ENTRYPOINT = ["python", "-m", "trainer.task"]
SERVE_ENTRYPOINT = ["python", "-m", "trainer.serve", "--host", "0.0.0.0", "--port", "8080"]
TRAINER_USER = "${TRAINER_UID}:${TRAINER_GID}"


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


PIP_FLAGS = ("--no-deps", "--no-build-isolation", "--check-build-dependencies", "--no-cache-dir")


def test_base_image_is_tensorflow_2_21_with_a_gpu_build_argument():
    steps = instructions()
    assert steps[0] == ("ARG", f"BASE_IMAGE={BASE_IMAGE}")
    # sources; the trainer; the serving image on it; last (docker build's default target) the trainer again
    assert values_of("FROM") == ["scratch AS source", "${BASE_IMAGE} AS trainer", "trainer AS serve", "trainer"]
    assert steps[-1] == ("FROM", "trainer")
    assert "2.21.0-gpu" in DOCKERFILE.read_text(encoding="utf-8")  # documented GPU build


def stage(name: str) -> list[tuple[str, str]]:
    """The instructions of the stage `FROM ... AS name`."""
    steps = instructions()
    (start,) = [i for i, (key, rest) in enumerate(steps) if key == "FROM" and rest.endswith(f" AS {name}")]
    end = next((i for i in range(start + 1, len(steps)) if steps[i][0] == "FROM"), len(steps))
    return steps[start + 1:end]


def stage_values(name: str, keyword: str) -> list[str]:
    return [rest for key, rest in stage(name) if key == keyword]


def copied_sources() -> list[str]:
    """The context paths the source stage copies (COPY SRC... DEST)."""
    return [src for rest in values_of("COPY") for src in rest.split()[:-1]]


def bound_sources() -> list[str]:
    """The context paths RUN steps bind-mount straight from the build context (no from=)."""
    found = []
    for rest in values_of("RUN"):
        for word in shlex.split(rest):
            options = dict(o.split("=", 1) for o in word.removeprefix("--mount=").split(",")) \
                if word.startswith("--mount=") else {}
            if options.get("type") == "bind" and "from" not in options:
                found.append(options["source"])
    return found


def pip_install_step(name: str = "trainer") -> list[str]:
    (run,) = [rest for rest in stage_values(name, "RUN") if "pip install" in rest]
    return shlex.split(run)


def test_image_installs_the_package_with_pip_and_runs_it_as_uid_1000():
    assert copied_sources() == ["pyproject.toml", "LICENSE", "trainer/"]
    assert not [rest for key, rest in stage("trainer") if key in ("COPY", "ADD")]  # sources mounted, not copied
    assert values_of("ADD") == []
    run = pip_install_step()
    assert run[0] == "--mount=type=bind,from=source,source=/src,target=/run/tfjob-src", run
    assert all(flag in run for flag in PIP_FLAGS), run
    assert run[-3:] == ["rm", "-rf", "/tmp/tfjob-src"], run  # no layer keeps the sources
    assert values_of("WORKDIR") == ["/app"]
    assert "TRAINER_UID=1000" in values_of("ARG") and "TRAINER_GID=1000" in values_of("ARG")
    assert stage_values("trainer", "USER") == [TRAINER_USER]
    assert [key for key, _ in stage("trainer")][-1] == "ENTRYPOINT"
    assert [json.loads(rest) for rest in stage_values("trainer", "ENTRYPOINT")] == [ENTRYPOINT]
    assert values_of("CMD") == []  # empty TFJob args must run the trainer, not a default CMD
    env = " ".join(values_of("ENV"))
    assert "PYTHONPATH" not in env and "PYTHONUNBUFFERED=1" in env  # the installed package, no path tricks


def test_serving_image_adds_hash_pinned_kserve_and_serves_as_uid_1000():
    run = pip_install_step("serve")
    assert run[:2] == ["--mount=type=bind,source=serve-requirements.lock,target=/run/serve-requirements.lock",
                       "--mount=type=secret,id=pip-ca,target=/run/pip-ca.crt"], run  # the CA: a secret, not a layer
    assert all(flag in run for flag in ("--no-deps", "--require-hashes", "--only-binary=:all:", "--no-cache-dir"))
    assert run[run.index("-r") + 1] == "/run/serve-requirements.lock"
    assert stage_values("serve", "USER") == ["0", TRAINER_USER]  # installs as root, runs as the trainer's uid
    for name in ("trainer", "serve"):  # an ARG does not cross stages: each imports the global uid and gid
        assert stage_values(name, "ARG")[:2] == ["TRAINER_UID", "TRAINER_GID"], name
    assert [key for key, _ in stage("serve")][-1] == "ENTRYPOINT"
    assert [json.loads(rest) for rest in stage_values("serve", "ENTRYPOINT")] == [SERVE_ENTRYPOINT]
    assert stage_values("serve", "EXPOSE") == ["8080"]


def test_serve_lock_pins_the_serve_extras_kserve_by_hash():
    requirements = [r.strip() for r in SERVE_LOCK.read_text(encoding="utf-8").replace("\\\n", " ").splitlines()
                    if r.strip() and not r.startswith("#")]
    assert requirements and all(re.fullmatch(r"[A-Za-z0-9_.-]+==\S+ +--hash=sha256:[0-9a-f]{64}", r)
                                for r in requirements), requirements
    pinned = dict(r.split(" ")[0].split("==") for r in requirements)
    serve_extra = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))[
        "project"]["optional-dependencies"]["serve"]
    assert f"kserve=={pinned['kserve']}" in serve_extra
    assert "tensorflow" not in pinned and "tensorflow-cpu" not in pinned  # the base's, as it is


def test_dockerignore_lets_in_exactly_what_the_dockerfile_uses():
    lines = [line.strip() for line in (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
             if line.strip() and not line.startswith("#")]
    assert lines[0] == "*"
    allowed = [line[1:] for line in lines[1:] if line.startswith("!")]
    assert sorted(allowed) == sorted(copied_sources() + bound_sources()), (allowed, copied_sources())
    assert "launcher/" not in allowed and "README.md" not in allowed


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """The project installed as the Dockerfile installs it, into a --target directory: pip
    with the Dockerfile's flags, on the sources its source stage copies, README.md a stand-in.
    Returns (site, env, workdir): workdir is empty, like the image's /app."""
    tmp = tmp_path_factory.mktemp("image")
    src, site, workdir = tmp / "src", tmp / "site", tmp / "app"
    for path in copied_sources():
        if path.endswith("/"):
            shutil.copytree(ROOT / path, src / path, ignore=shutil.ignore_patterns("__pycache__", "*.py[co]"))
        else:
            src.mkdir(exist_ok=True)
            shutil.copy2(ROOT / path, src / path)
    (src / "README.md").write_text("stand-in\n", encoding="utf-8")
    workdir.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PIP_"))}
    done = subprocess.run([sys.executable, "-m", "pip", "install", *PIP_FLAGS, "--disable-pip-version-check",
                           "--no-index", "--target", str(site), str(src)],
                          env=env, capture_output=True, text=True, timeout=TOOL_TIMEOUT, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    env.update(PYTHONPATH=str(site), PYTHONDONTWRITEBYTECODE="1", PYTHONUNBUFFERED="1", HOME=str(tmp))
    return site, env, workdir


def _run_installed(installed, *args: str) -> subprocess.CompletedProcess:
    """`python ARGS` against the installed trainer only, from its empty working directory."""
    _, env, workdir = installed
    done = subprocess.run([sys.executable, *args], cwd=workdir, env=env, capture_output=True, text=True,
                          timeout=TOOL_TIMEOUT, check=False)
    assert done.returncode == 0, done.stderr
    return done


def test_installed_distribution_is_the_package_version_with_the_trainer_only(installed):
    site = installed[0]
    probe = ("import importlib.metadata as m, json; d = m.distribution('tfjob-launcher'); "
             "print(json.dumps([d.version, str(d.locate_file('')), sorted({f.parts[0] for f in d.files})]))")
    done = _run_installed(installed, "-c", probe)
    installed_version, location, tops = json.loads(done.stdout)
    assert installed_version == package_version() and location == str(site)
    assert "trainer" in tops and "launcher" not in tops, tops
    assert (site / "trainer" / "task.py").is_file() and not (site / "launcher").exists()


def test_entrypoint_runs_the_installed_trainer(installed):
    command = [sys.executable if part == "python" else part for part in ENTRYPOINT] + ["--help"]
    done = _run_installed(installed, *command[1:])
    assert "usage:" in done.stdout and "--job-dir" in done.stdout, done.stdout


def test_trainer_in_the_image_needs_nothing_but_itself(installed):
    site = installed[0]
    probe = ("import sys, trainer.task; print(trainer.task.__file__); "
             "print(sorted(m for m in sys.modules if m.split('.')[0] in ('launcher', 'tests')))")
    done = _run_installed(installed, "-c", probe)
    module_file, foreign = done.stdout.strip().splitlines()[-2:]
    assert module_file == str(site / "trainer" / "task.py"), module_file
    assert foreign == "[]", f"trainer.task imports {foreign}; the image holds the trainer only"
