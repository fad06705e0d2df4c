"""Batch prediction from and to gs:// for real: input objects in the real GCS emulator
(fake-gcs-server, reached by the launcher's google-cloud-storage client through
STORAGE_EMULATOR_HOST), the real MNIST export served by the real local model server, the
results object compared with what the same run writes to a local folder. The bucket-side
refusals (no such bucket, nothing matched, results already there, a bad line) need no model
server; permission denied and a failing GCS come from a test double (fake-gcs-server has
no IAM and does not fail)."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from launcher.serving.gcs import expand
from launcher.serving.predictions import instances_of, read_placed, read_request
from tests.support.gcs_denied import DeniedGcs
from tests.support.launcher_process import run_launcher
from tests.support.ports import free_port
from tests.support.serving import COMMAND_TIMEOUT, DATA, ROOT, served_model

pytestmark = pytest.mark.usefixtures("cli_env")  # the packaged TFJob CRD, a per-session schema cache

BUCKET = "batch-predict"
COUNT = 300
RESULTS, ERRORS = "prediction.results-00000-of-00001", "prediction.errors_stats-00000-of-00001"
CLOSED = "http://127.0.0.1:9"  # --url for refusals: they come before any request to a model server


@pytest.fixture
def emulated(gcs, monkeypatch):
    """The launcher in this process talks to the emulator; yields the bucket (created, empty of ours)."""
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs.endpoint)
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    gcs.make_bucket(BUCKET)
    return gcs.client().bucket(BUCKET)


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask



def test_patterns_are_matched_against_the_buckets_listing(emulated, gcs):
    for name in ["match/part-0.json", "match/part-1.json", "match/part-1.txt", "match/deep/part-2.json",
                 "match/", "match-other/part-0.json"]:
        emulated.blob(name).upload_from_string(b"{}\n")
    url = f"gs://{BUCKET}/match"
    assert expand(f"{url}/part-*.json", "--input-paths") == [f"{url}/part-0.json", f"{url}/part-1.json"]
    assert expand(f"{url}/*", "--input-paths") == [f"{url}/part-0.json", f"{url}/part-1.json",
                                                    f"{url}/part-1.txt"]
    assert expand(f"{url}/**.json", "--input-paths") == [f"{url}/deep/part-2.json", f"{url}/part-0.json",
                                                          f"{url}/part-1.json"]
    assert expand(f"{url}/part-1.txt", "--input-paths") == [f"{url}/part-1.txt"]


def test_an_object_is_split_into_lines_as_a_local_file_is(emulated, tmp_path):
    text = '{"text": "one\u2028still one"}\r\n\n{"text": "two"}'  # U+2028 is no line end in a file
    emulated.blob("lines/r.json").upload_from_string(text.encode())
    (tmp_path / "r.json").write_bytes(text.encode())
    expected = [{"text": "one\u2028still one"}, {"text": "two"}]
    assert instances_of(read_placed(f"gs://{BUCKET}/lines/r.json", "--input-paths")) == expected
    assert instances_of(read_placed(str(tmp_path / "r.json"), "--input-paths")) == expected


def test_a_request_body_is_read_from_a_bucket_as_from_a_file(emulated, tmp_path):
    """gcloud's --json-request, gs:// too: one body over several lines, with its signature name."""
    text = '{"signature_name": "unkeyed",\n "instances": [\n  {"image": [0.5]},\n  {"image": [1.0]}]}\n'
    emulated.blob("requests/body.json").upload_from_string(text.encode())
    (tmp_path / "body.json").write_text(text)
    for path in (f"gs://{BUCKET}/requests/body.json", str(tmp_path / "body.json")):
        assert read_request(path) == ([(f"{path} instance 1", {"image": [0.5]}),
                                       (f"{path} instance 2", {"image": [1.0]})], "unkeyed")


@pytest.mark.parametrize("inputs, output, field, says", [
    ("gs://no-such-bucket/r/*.json", "{tmp}/out", "--input-paths",
     "gs://no-such-bucket/r/*.json: bucket gs://no-such-bucket does not exist"),
    (f"gs://{BUCKET}/refuse/nothing-*.json", "{tmp}/out", "--input-paths",
     f"'gs://{BUCKET}/refuse/nothing-*.json' matches no object"),
    (f"gs://{BUCKET}/refuse", "{tmp}/out", "--input-paths", f"it is a folder, use gs://{BUCKET}/refuse/*"),
    (f"gs://{BUCKET}/refuse/bad.json", "{tmp}/out", "--input-paths",
     f"gs://{BUCKET}/refuse/bad.json line 2 is not JSON"),
    (f"gs://{BUCKET}/refuse/good.json", "gs://no-such-bucket/out", "--output-path",
     "gs://no-such-bucket/out/prediction.results-00000-of-00001: bucket gs://no-such-bucket does not exist"),
    (f"gs://{BUCKET}/refuse/good.json", f"gs://{BUCKET}/refuse/done", "--output-path",
     f"gs://{BUCKET}/refuse/done already holds prediction results"),
])
def test_bucket_side_errors_are_one_line_naming_the_flag_and_path_and_write_nothing(
        cli, emulated, gcs, tmp_path, inputs, output, field, says):
    emulated.blob("refuse/good.json").upload_from_string(b'{"image": [0.0], "key": 0}\n')
    emulated.blob("refuse/bad.json").upload_from_string(b'{"image": [0.0], "key": 0}\n{image: 1}\n')
    emulated.blob(f"refuse/done/{RESULTS}").upload_from_string(b"{}\n")
    before = gcs.list(f"gs://{BUCKET}")
    line = cli("predict", "mnist", "--input-paths", inputs, "--output-path", output.format(tmp=tmp_path),
               "--url", CLOSED).refused(field)
    assert says in line, line
    assert gcs.list(f"gs://{BUCKET}") == before
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("argv, field", [
    (["--input-paths", "gs://some-bucket/r/*.json", "--output-path", "{tmp}/out"], "--input-paths"),
    (["--input-paths", "{tmp}/request.json", "--output-path", "gs://some-bucket/out"], "--output-path"),
])
def test_permission_denied_is_one_line_naming_the_flag_and_path(cli, monkeypatch, tmp_path, argv, field):
    (tmp_path / "request.json").write_text('{"image": [0.0], "key": 0}\n')
    with DeniedGcs() as denied:
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", denied.url)
        argv = [a.format(tmp=tmp_path) for a in argv]
        line = cli("predict", "mnist", *argv, "--url", CLOSED).refused(field)
    assert "gs://some-bucket/" in line and "permission denied (403)" in line, line
    assert denied.requests and all(method == "GET" for method, _ in denied.requests)  # listed, never wrote
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_batch_prediction_from_and_to_a_bucket_equals_the_local_run(mnist_job, gcs, tmp_path):
    request = tmp_path / "request.json"
    made = subprocess.run([sys.executable, "-m", "trainer.make_request", "--data-dir", str(DATA), "--count",
                           str(COUNT), "--out", str(request)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert made.returncode == 0, made.stderr
    lines = request.read_text().splitlines(keepends=True)
    local_inputs = tmp_path / "requests"
    local_inputs.mkdir()
    gcs.make_bucket(BUCKET)
    bucket = gcs.client().bucket(BUCKET)
    parts = {"part-0.json": lines[:100], "part-1.json": lines[100:250], "part-2.json": lines[250:]}
    for name, part in parts.items():
        (local_inputs / name).write_text("".join(part))
        bucket.blob(f"run/requests/{name}").upload_from_string("".join(part).encode())
    bucket.blob("run/requests/notes.txt").upload_from_string(b"not an instance\n")  # the patterns skip it
    env = {**mnist_job.env, "STORAGE_EMULATOR_HOST": gcs.endpoint}
    with served_model(mnist_job, "mnist-batch-gcs"):
        local = run_launcher(env, "predict", "mnist-batch-gcs", "--input-paths", f"{local_inputs}/part-*.json",
                             "--output-path", str(tmp_path / "out"), "--batch-size", "64", "--backend", "local",
                             timeout=COMMAND_TIMEOUT)
        remote = run_launcher(env, "predict", "mnist-batch-gcs", "--input-paths",
                              f"gs://{BUCKET}/run/requests/part-[01].json,gs://{BUCKET}/run/requests/part-2*",
                              "--output-path", f"gs://{BUCKET}/run/out/", "--batch-size", "64", "--backend", "local",
                              timeout=COMMAND_TIMEOUT)
        online = run_launcher(env, "predict", "mnist-batch-gcs", "--json-instances",
                              f"gs://{BUCKET}/run/requests/part-0.json", "--backend", "local",
                              timeout=COMMAND_TIMEOUT)
    assert local.returncode == 0, local.stderr
    assert remote.returncode == 0, remote.stderr
    assert remote.stdout.strip() == f"Wrote {COUNT} predictions to gs://{BUCKET}/run/out/{RESULTS}"
    assert gcs.list(f"gs://{BUCKET}/run/out/") == [f"run/out/{ERRORS}", f"run/out/{RESULTS}"]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [ERRORS, RESULTS]  # no partial file left
    assert (tmp_path / "out" / RESULTS).stat().st_mode & 0o777 == 0o666 & ~current_umask()
    results = bucket.blob(f"run/out/{RESULTS}").download_as_text()
    assert results == (tmp_path / "out" / RESULTS).read_text()
    rows = [json.loads(line) for line in results.splitlines()]
    assert [row["key"] for row in rows] == list(range(COUNT))  # every instance once, in input order
    assert all(set(row) == {"key", "classes", "probabilities"} for row in rows)
    assert bucket.blob(f"run/out/{ERRORS}").download_as_text() == ""
    assert online.returncode == 0, online.stderr
    table = online.stdout.strip().splitlines()[1:]
    assert [int(re.split(r"\s+", line)[1]) for line in table] == [row["classes"] for row in rows[:100]]


def test_gcs_failing_is_one_line_exit_1(cli, monkeypatch, tmp_path):
    with DeniedGcs(status=400) as failing:  # not retried by the client, unlike 5xx
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", failing.url)
        result = cli("predict", "mnist", "--input-paths", "gs://some-bucket/r/*.json", "--output-path",
                     str(tmp_path / "out"), "--url", CLOSED)
    assert result.code == 1 and result.out == "", result
    [line] = result.err.strip().splitlines()
    assert line.startswith("error: --input-paths: gs://some-bucket/r/*.json: GCS failed (BadRequest: "), line
    assert line.endswith(": Invalid argument.)"), line
    assert not (tmp_path / "out").exists()


def test_batches_the_server_fails_go_to_the_errors_object_and_exit_1(cli, emulated, gcs):
    emulated.blob("down/requests/part-0.json").upload_from_string(b'{"image": [0.0], "key": 0}\n' * 3)
    result = cli("predict", "mnist", "--input-paths", f"gs://{BUCKET}/down/requests/*.json", "--output-path",
                 f"gs://{BUCKET}/down/out", "--batch-size", "2", "--url", f"http://127.0.0.1:{free_port()}")
    assert result.code == 1, result
    assert result.out.strip() == (f"Wrote 0 predictions to gs://{BUCKET}/down/out/{RESULTS}; 3 instances failed, "
                                  f"see gs://{BUCKET}/down/out/{ERRORS}")
    errors = [json.loads(line) for line in emulated.blob(f"down/out/{ERRORS}").download_as_text().splitlines()]
    assert [(e["batch"], e["instances"]) for e in errors] == [(0, 2), (1, 1)]
    assert emulated.blob(f"down/out/{RESULTS}").download_as_text() == ""
