"""The built trainer image run by podman + runc as a TFJob pod would run it: as uid 1000,
no network, no capabilities, read-only root; real TensorFlow on the real MNIST TFRecords;
the trainer it runs is the project's package installed by pip (version, place, owner)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.support.image import package_version
from tests.support.tools import ROOT
from tests.support.trainer_cluster import export_path, final_metrics, run_module

TRAINER_UID = 1000
STEPS = 30


@pytest.fixture(scope="module")
def mnist_records() -> Path:
    """data/mnist of scripts/setup: the full real MNIST as TFRecords."""
    data = (ROOT / "data" / "mnist").resolve()
    if not list(data.glob("train-*.tfrecord")) or not list(data.glob("test-*.tfrecord")):
        pytest.fail(f"no MNIST TFRecords in {data}; run scripts/setup", pytrace=False)
    return data


def test_bad_tf_config_exits_2_with_one_line(run_container, tmp_path):
    job = tmp_path / "job"
    job.mkdir()
    os.chown(job, TRAINER_UID, TRAINER_UID)
    config = json.dumps({"cluster": {"chief": ["tf-chief-0.ns.svc:2222"], "worker": ["tf-worker-0.ns.svc:2222"]},
                         "task": {"type": "boss", "index": 0}})
    done = run_container("--job-dir", "/job", env={"TF_CONFIG": config}, volumes=(f"{job}:/job",))
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("trainer: TF_CONFIG"), done.stderr
    assert "unknown role 'boss'" in lines[0], done.stderr
    assert done.stdout == "" and list(job.iterdir()) == []


@pytest.mark.slow
def test_one_process_trains_on_real_mnist_and_exports_a_model_that_predicts(run_container, mnist_records,
                                                                            tmp_path):
    job = tmp_path / "job"
    job.mkdir()
    os.chown(job, TRAINER_UID, TRAINER_UID)
    done = run_container("--job-dir", "/job", "--data-dir", "/data", "--train-steps", str(STEPS),
                         "--batch-size", "32", "--steps-per-execution", "5", "--log-every-steps", "10",
                         "--warmup-steps", "5", "--eval-every-steps", "0", "--checkpoint-every-steps", "0",
                         "--threads", "2",
                         volumes=(f"{mnist_records}:/data:ro", f"{job}:/job"))
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-3000:]
    step, _, accuracy = final_metrics(log)
    assert step == STEPS and 0.0 <= accuracy <= 1.0, log[-3000:]

    export = Path(export_path(log))  # as the container saw it: /job/export/<timestamp>
    assert export.parent == Path("/job/export"), export
    saved = job / "export" / export.name
    assert (saved / "saved_model.pb").is_file()
    assert json.loads((job / "done.json").read_text())["step"] == STEPS
    assert {path.stat().st_uid for path in job.rglob("*")} == {TRAINER_UID}  # written by uid 1000

    # The host's TensorFlow serves what the container's TensorFlow exported.
    request = tmp_path / "request.json"
    made = run_module("trainer.make_request", ["--data-dir", str(mnist_records), "--count", "3",
                                               "--out", str(request)])
    assert made.returncode == 0, made.stderr[-2000:]
    predicted = run_module("trainer.predict", ["--model-dir", str(saved), "--json-instances", str(request)])
    assert predicted.returncode == 0, predicted.stderr[-2000:]
    rows = predicted.stdout.splitlines()
    assert rows[0] == "KEY  CLASSES  PROBABILITIES" and len(rows) == 4, predicted.stdout
    for key, row in enumerate(rows[1:]):
        fields = row.split(maxsplit=2)
        assert int(fields[0]) == key and 0 <= int(fields[1]) <= 9 and len(json.loads(fields[2])) == 10


PROBE = """
import importlib.metadata, importlib.util, json, os, shutil, sys, sysconfig, tensorboard, tensorflow, trainer
package = os.path.dirname(trainer.__file__)
dist = importlib.metadata.distribution("tfjob-launcher")
code = [package] + [os.path.join(top, name) for top, dirs, files in os.walk(package) for name in dirs + files]
print(json.dumps({"uid": os.getuid(), "gid": os.getgid(), "python": sys.executable,
                  "tensorflow": tensorflow.__version__, "tensorboard": tensorboard.__version__,
                  "version": importlib.metadata.version("tfjob-launcher"), "trainer": trainer.__file__,
                  "site": sysconfig.get_paths()["purelib"], "dist": str(dist.locate_file("")),
                  "writable": [p for p in code if os.stat(p).st_uid != 0 or os.stat(p).st_mode & 0o022],
                  "files": len(code), "launcher": importlib.util.find_spec("launcher") is not None,
                  "tfjob_script": shutil.which("tfjob"), "cwd": os.getcwd(), "cwd_entries": os.listdir("."),
                  "sources": [p for p in ("/tmp/tfjob-src", "/run/tfjob-src") if os.path.exists(p)],
                  "pythonpath": os.environ.get("PYTHONPATH")}))
"""


def test_image_installs_the_package_version_read_only_for_uid_1000(run_container):
    done = run_container("-c", PROBE, entrypoint="python", user=None)  # the image's own USER
    assert done.returncode == 0, done.stderr[-3000:]
    facts = json.loads(done.stdout.strip().splitlines()[-1])
    assert (facts["uid"], facts["gid"]) == (TRAINER_UID, TRAINER_UID), facts
    assert facts["tensorflow"].startswith("2.21.") and facts["tensorboard"].startswith("2.21."), facts
    # The trainer is the installed distribution of pyproject.toml, not a copied tree on PYTHONPATH.
    assert facts["version"] == package_version(), facts
    assert facts["trainer"] == os.path.join(facts["site"], "trainer", "__init__.py"), facts
    assert facts["dist"] == facts["site"] and facts["pythonpath"] is None, facts
    # root-owned, not writable by group or others: uid 1000 cannot change the code it runs
    assert facts["files"] > 30 and facts["writable"] == [], facts
    assert not facts["launcher"] and facts["tfjob_script"] is None and facts["sources"] == [], facts
    assert facts["cwd"] == "/app" and facts["cwd_entries"] == [], facts
