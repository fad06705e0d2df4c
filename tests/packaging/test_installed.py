"""The wheel installed into new virtual environments and run from a directory outside the
checkout, as a user would: without TensorFlow (every launcher module imports; render,
submit --dry-run, the local backend's one-line refusal, --version; the trainer's and gs://
for predict's one-line refusals without the [trainer] and [gcs] extras), at the oldest
versions of its dependencies that its bounds allow (render, and a job on a cluster: the
fake API server), and with the [local] extra (a short real parameter-server job to
Succeeded on the local backend)."""
from __future__ import annotations

import json
import textwrap

import pytest
import yaml

from launcher.validate import validate
from tests.support.packaging import Dists, Venv, lowest_pins, new_venv

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


def test_every_launcher_module_imports_without_tensorflow(lean: Venv):
    """The launcher never imports TensorFlow (nor numpy, which comes with it) at a module's
    top: a command that reached such a module would be a traceback in the lean install."""
    done = lean.run(lean.python, "-c", textwrap.dedent("""
        import importlib, json, pkgutil, launcher
        names, failed = [], {}
        for module in pkgutil.walk_packages(launcher.__path__, "launcher."):
            names.append(module.name)
            try:
                importlib.import_module(module.name)
            except Exception as error:
                failed[module.name] = repr(error)
        print(json.dumps([names, failed]))"""))
    assert done.returncode == 0, done.stderr
    names, failed = json.loads(done.stdout)
    assert {"launcher.cli.submit", "launcher.backends.k8s.client", "launcher.serving.k8s"} <= set(names), names
    assert failed == {}


def test_the_trainer_without_tensorflow_is_one_line_naming_the_extra(lean: Venv):
    helped = lean.run(lean.python, "-m", "trainer.task", "--help")
    assert helped.returncode == 0 and helped.stdout.startswith("usage: python -m trainer.task"), helped.stderr
    done = lean.run(lean.python, "-m", "trainer.task", "--train-steps", "1", "--job-dir", "job")
    assert (done.returncode, done.stdout) == (2, ""), done.stdout + done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith("trainer: ") and "pip install 'tfjob-launcher[trainer]'" in line, line
    assert not (lean.home / "job").exists()
    for module, args in (("trainer.data", ("--out", "data")), ("trainer.predict", ("--help",)),
                         ("trainer.make_request", ("--out", "req.json"))):  # numpy too is the extra's
        done = lean.run(lean.python, "-m", module, *args)
        assert (done.returncode, done.stdout) == (2, ""), module + ": " + done.stdout + done.stderr
        [line] = done.stderr.splitlines()
        assert line.startswith(f"{module}: TensorFlow is not installed") and "[trainer]'" in line, line
    assert not (lean.home / "data").exists() and not (lean.home / "req.json").exists()


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


@pytest.fixture(scope="module")
def floor(dists: Dists, tmp_path_factory) -> Venv:
    """The wheel with each of its dependencies at the oldest version its bounds allow."""
    venv = new_venv(tmp_path_factory.mktemp("floor"))
    venv.pip_install(str(dists.wheel), *lowest_pins(dists.wheel))
    return venv


def test_at_the_oldest_dependencies_it_allows_render_and_a_cluster_job_work(floor: Venv, fake_apiserver,
                                                                             fake_operator, tmp_path):
    """`kubernetes>=31.0` let pip install a client without ApiClient.param_serialize (37.0
    has it), which the pod table and the logs call: `status` and `logs` were tracebacks."""
    done = floor.run("tfjob", "render", "--name", "floor", "--workers", "2", "--ps", "1")
    assert done.returncode == 0, done.stderr
    assert validate(yaml.safe_load(done.stdout)) is True
    k8s = ("--backend", "k8s", "--kubeconfig", str(fake_apiserver.write_kubeconfig(tmp_path / "kubeconfig")))
    done = floor.run("tfjob", "submit", "floor", *k8s, "--workers", "1", "--detach",
                     "--", "--data-dir", "gs://bucket/mnist")
    assert done.returncode == 0, done.stdout + done.stderr
    for pod in fake_operator.create_pods("floor"):
        fake_operator.start(pod)
    fake_operator.log("floor-chief-0", "Train step 1")
    status = floor.run("tfjob", "status", "floor", *k8s, "-o", "json")
    assert status.returncode == 0, status.stdout + status.stderr
    replicas = json.loads(status.stdout)["replicas"]
    assert sorted((r["type"], r["phase"]) for r in replicas) == [("Chief", "Running"), ("PS", "Running"),
                                                                      ("Worker", "Running")], replicas
    logs = floor.run("tfjob", "logs", "floor", *k8s)
    assert (logs.returncode, logs.stdout) == (0, "[chief-0] Train step 1\n"), logs.stdout + logs.stderr


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
