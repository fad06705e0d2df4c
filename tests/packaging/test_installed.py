"""The wheel installed into new virtual environments and run from a directory outside the
checkout, as a user would: without TensorFlow (render, submit --dry-run, the local
backend's one-line refusal, --version; gs:// for predict refused in one line without the
[gcs] extra), and with the [local] extra (a short real parameter-server job to Succeeded
on the local backend)."""
from __future__ import annotations

import json

import pytest
import yaml

from launcher.validate import validate
from tests.support.packaging import Dists, Venv, new_venv

pytestmark = pytest.mark.packaging
VERSION = "0.1.0"
JOB_TIMEOUT = 900.0


@pytest.fixture(scope="module")
def lean(dists: Dists, tmp_path_factory) -> Venv:
    """The wheel alone: no TensorFlow."""
    venv = new_venv(tmp_path_factory.mktemp("lean"))
    venv.pip_install(str(dists.wheel))
    return venv


def one_line_error(done) -> str:
    assert done.returncode == 2 and done.stdout == "", done.stdout + done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, done.stderr
    return lines[0]


def test_the_installed_launcher_runs_from_site_packages_without_tensorflow(lean: Venv):
    done = lean.run(lean.python, "-c", "import importlib.util, json, launcher, trainer; print(json.dumps("
                    "[launcher.__file__, trainer.__file__, importlib.util.find_spec('tensorflow') is None]))")
    assert done.returncode == 0, done.stderr
    launcher_file, trainer_file, no_tensorflow = json.loads(done.stdout)
    assert launcher_file.startswith(str(lean.path)) and trainer_file.startswith(str(lean.path))
    assert no_tensorflow


@pytest.mark.parametrize("command", [("tfjob",), ("python", "-m", "launcher")])
def test_version(lean: Venv, command):
    done = lean.run(*command, "--version")
    assert (done.returncode, done.stdout) == (0, f"tfjob-launcher {VERSION}\n"), done.stderr


def test_render_is_valid_against_the_crd(lean: Venv):
    done = lean.run("tfjob", "render", "--name", "pkg", "--workers", "2", "--ps", "1",
                    "--volume", "runs:/mnt/runs", "--", "--train-steps", "10")
    assert done.returncode == 0, done.stderr
    manifest = yaml.safe_load(done.stdout)
    assert manifest["kind"] == "TFJob" and set(manifest["spec"]["tfReplicaSpecs"]) == {"Chief", "PS", "Worker"}
    assert validate(manifest) is True
    assert one_line_error(lean.run("tfjob", "render", "--workers", "1000000000000")) == \
        "error: --workers: replica count 1000000000000 is too large; use at most 2147483647"


def test_values_out_and_json_output(lean: Venv):
    done = lean.run("tfjob", "render", "--name", "pkg", "-o", "json", "--values-out", "values.yaml")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["metadata"]["name"] == "pkg"
    assert yaml.safe_load((lean.home / "values.yaml").read_text())["jobName"] == "pkg"


@pytest.mark.parametrize("backend", ["k8s", "local"])
def test_submit_dry_run(lean: Venv, backend):
    done = lean.run("tfjob", "submit", "--dry-run", "--backend", backend, "--name", "pkg", "--workers", "2")
    assert done.returncode == 0, done.stderr
    manifest, *others = yaml.safe_load_all(done.stdout)
    assert validate(manifest) is True
    # a cluster gets the job's NetworkPolicy beside the TFJob (the packaged second template)
    assert [doc["kind"] for doc in others] == (["NetworkPolicy"] if backend == "k8s" else [])
    assert not (lean.home / "runs").exists()


def test_local_backend_without_tensorflow_is_one_line_and_starts_nothing(lean: Venv):
    done = lean.run("tfjob", "submit", "--name", "pkg", "--workers", "2", "--ps", "1")  # auto: no cluster
    line = one_line_error(done)
    assert line.startswith("error: --backend local: ") and "pip install 'tfjob-launcher[local]'" in line
    assert not (lean.home / "runs").exists()
    assert one_line_error(lean.run("tfjob", "submit", "--backend", "local", "--name", "pkg")) == line


def test_gs_paths_without_the_gcs_extra_are_one_line_and_write_nothing(lean: Venv):
    assert lean.run(lean.python, "-c", "import google.cloud.storage").returncode != 0  # not in the lean install
    (lean.home / "request.json").write_text('{"image": [0.0], "key": 0}\n')
    for argv, flag in [(("--input-paths", "gs://bucket/requests/*.json", "--output-path", "out"), "--input-paths"),
                       (("--input-paths", "request.json", "--output-path", "gs://bucket/out"), "--output-path")]:
        line = one_line_error(lean.run("tfjob", "predict", "mnist", *argv, "--url", "http://127.0.0.1:9"))
        assert line.startswith(f"error: {flag}: ") and "pip install 'tfjob-launcher[gcs]'" in line, line
    assert not (lean.home / "out").exists()


@pytest.mark.slow
@pytest.mark.timeout(2 * 1200 + JOB_TIMEOUT)  # a TensorFlow install (INSTALL_TIMEOUT), then the job
def test_with_the_local_extra_a_ps_job_succeeds(dists: Dists, tmp_path, mnist_dir):  # noqa: F811
    venv = new_venv(tmp_path)
    venv.pip_install(f"{dists.wheel}[local]")
    done = venv.run("tfjob", "submit", "--backend", "local", "--name", "pkg-ps", "--workers", "1", "--ps", "1",
                    "--", "--data-dir", mnist_dir, "--train-steps", "30", "--threads", "1",
                    "--log-every-steps", "10", "--steps-per-execution", "5", "--eval-every-steps", "0",
                    "--checkpoint-every-steps", "30", "--poll-seconds", "1", timeout=JOB_TIMEOUT)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Succeeded" in done.stdout
    output = venv.home / "runs" / "default" / "pkg-ps" / "output"
    assert any(p.name == "saved_model.pb" for p in (output / "export").rglob("*")), sorted(output.rglob("*"))
    status = venv.run("tfjob", "status", "pkg-ps", "--backend", "local")
    assert status.stdout.splitlines()[0].endswith("Succeeded"), status.stdout + status.stderr
