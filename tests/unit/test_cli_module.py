"""gcloud's --module-name / --package-path: the TFJob runs `python -m MODULE` with the
package's parent on PYTHONPATH and as working directory; where the package must be for
each backend (local: this machine; k8s: inside the pods, under a --volume mount)."""
from __future__ import annotations

import json

import pytest

from tests.support.fakes.backend import FakeBackend

pytestmark = pytest.mark.usefixtures("cli_env")  # the packaged TFJob CRD, a per-session schema cache


def container(manifest: dict, rtype: str = "Worker") -> dict:
    return manifest["spec"]["tfReplicaSpecs"][rtype]["template"]["spec"]["containers"][0]


def test_module_alone_runs_it_from_the_image(cli):
    result = cli("render", "--name", "own", "--module-name", "trainer.task", "--", "--train-steps", "5")
    assert result.code == 0, result.err
    worker = container(result.manifest())
    assert worker["command"] == ["python", "-m", "trainer.task"] and worker["args"] == ["--train-steps", "5"]
    assert "workingDir" not in worker and all(e["name"] != "PYTHONPATH" for e in worker["env"])


def test_a_package_on_a_claim_is_on_the_path_of_every_replica(cli):
    result = cli("render", "--name", "own", "--module-name", "my_trainer.task", "--volume", "code:/mnt/code:ro",
                 "--package-path", "/mnt/code/src/my_trainer/")
    assert result.code == 0, result.err
    for rtype in ("Chief", "PS", "Worker"):
        replica = container(result.manifest(), rtype)
        assert replica["command"] == ["python", "-m", "my_trainer.task"]
        assert replica["workingDir"] == "/mnt/code/src"
        assert {"name": "PYTHONPATH", "value": "/mnt/code/src"} in replica["env"]


def test_k8s_cannot_ship_a_local_package(cli, tmp_path):
    (tmp_path / "trainer").mkdir()
    (tmp_path / "trainer" / "task.py").write_text("print('hi')\n")
    backend = FakeBackend(name="k8s")
    result = cli("submit", "--backend", "k8s", "--name", "own", "--module-name", "trainer.task",
                 "--package-path", str(tmp_path / "trainer"), backend=backend)
    assert (result.code, result.out) == (2, "")
    assert result.err.splitlines()[-1].startswith(f"error: --package-path: {tmp_path / 'trainer'} is not in the pods: "
                                                  "the launcher cannot upload a package to a cluster; bake it into "
                                                  "--image")
    assert backend.submitted == [] and backend.dry_runs == []


def test_local_package_must_exist_and_hold_the_module(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    missing = cli("render", "--backend", "local", "--name", "own", "--module-name", "trainer.task",
                  "--package-path", "trainer", backend=FakeBackend(name="local"))
    assert missing.code == 2 and missing.err == (f"error: --package-path: {tmp_path / 'trainer'} is not a directory on "
                                                 "this machine; give your package's directory, e.g. --package-path "
                                                 "./trainer\n")
    (tmp_path / "trainer").mkdir()
    (tmp_path / "trainer" / "model.py").write_text("")
    no_module = cli("render", "--backend", "local", "--name", "own", "--module-name", "trainer.task",
                    "--package-path", "trainer", backend=FakeBackend(name="local"))
    assert no_module.code == 2 and no_module.err.startswith(
        f"error: --module-name: trainer.task is not in {tmp_path / 'trainer'} (no {tmp_path / 'trainer' / 'task.py'}); ")
    (tmp_path / "trainer" / "task.py").write_text("")
    ok = cli("render", "--backend", "local", "--name", "own", "--module-name", "trainer.task",
             "--package-path", "trainer/", "-o", "json", backend=FakeBackend(name="local", default_dir=str(tmp_path)))
    assert ok.code == 0, ok.err
    assert container(json.loads(ok.out))["workingDir"] == str(tmp_path)


def test_config_python_module_and_package_uris(cli, tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text("trainingInput:\n  scaleTier: BASIC\n  pythonModule: trainer.task\n"
                      "  packageUris: [gs://bucket/trainer-0.1.tar.gz]\n")
    result = cli("render", "--name", "own", "--config", str(config))
    assert result.code == 0, result.err
    assert container(result.manifest(), "Chief")["command"] == ["python", "-m", "trainer.task"]
    assert "note: trainingInput.packageUris is ignored: the launcher uploads and installs no packages" in result.err
    flag_wins = cli("render", "--name", "own", "--config", str(config), "--module-name", "mine.main")
    assert container(flag_wins.manifest(), "Chief")["command"] == ["python", "-m", "mine.main"]
    config.write_text("trainingInput:\n  scaleTier: BASIC\n  pythonModule: trainer.task\n"
                      "  masterConfig: {containerCommand: [python, run.py]}\n")
    both = cli("render", "--name", "own", "--config", str(config))
    assert both.code == 2 and both.err.startswith(f"error: --config {config}: --module-name from the file: conflicts "
                                                  "with the container command")


def test_a_package_path_with_a_terminal_escape_is_shown_as_its_repr(cli, tmp_path):
    """The refusal stays one line: the path's ESC and carriage return never reach the terminal."""
    package = tmp_path / "a\x1b[2J\rb" / "trainer"
    for backend in ("local", "k8s"):
        result = cli("render", "--backend", backend, "--name", "own", "--module-name", "trainer.task",
                     "--package-path", str(package), backend=FakeBackend(name=backend))
        assert result.code == 2 and result.err.count("\n") == 1, result.err
        assert f"error: --package-path: {str(package)!r} is not " in result.err and "\x1b" not in result.err
