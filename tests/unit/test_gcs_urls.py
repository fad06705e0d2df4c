"""gs:// URLs that users get wrong (trainer/paths.url_problem), refused in one line naming the
URL to write, before anything runs: by the launcher's --job-dir check on both backends, and
by the trainer's output checks (trainer/outputs.py) before any TensorFlow call. Before, a
slash missing (`gs:/bucket/x`) or `gs://` alone was a local path: the job trained and wrote
its checkpoints and export into `./gs:/...` inside the pod, lost with it; `gs://b//x` (an unset
variable) wrote objects named `/x/...`. A credentials
file that is not one is named too (TensorFlow goes on anonymously without saying so).
The checks that need a bucket: tests/integration/test_outputs_gcs.py."""
from __future__ import annotations

import pytest

from tests.support.fakes.backend import FakeBackend
from trainer import outputs, paths

pytestmark = pytest.mark.usefixtures("cli_env")  # the packaged TFJob CRD, a per-session schema cache

NEAR_MISSES = [  # (given, the reason, the URL offered)
    ("gs:/my-bucket/runs/1", "a slash is missing after gs:", "gs://my-bucket/runs/1"),
    ("gs:my-bucket/runs/1", "a slash is missing after gs:", "gs://my-bucket/runs/1"),
    ("GS://my-bucket/runs/1", "gs:// is written in lowercase", "gs://my-bucket/runs/1"),
    ("Gs://my-bucket/runs/1", "gs:// is written in lowercase", "gs://my-bucket/runs/1"),
]
BAD_BUCKETS = [  # (given, the problem, the URL offered)
    ("gs://", "bucket '' of 'gs://' is empty", "gs://my-bucket/runs/1"),
    ("gs:///runs/1", "is empty", "gs://my-bucket/runs/1"),
    ("gs://Bucket_With_Caps/x", "is not a Cloud Storage bucket name", "gs://bucket_with_caps/x"),
    ("gs://10.0.0.1/x", "is an IP address", "gs://my-bucket/x"),
    ("gs://goog-runs/x", "is reserved by Cloud Storage", "gs://my-bucket/x"),
    ("gs://my-google-runs/x", "is reserved by Cloud Storage", "gs://my-bucket/x"),
    ("gs://ab/x", "is not a Cloud Storage bucket name", "gs://my-bucket/x"),  # 3 characters at least
    ("gs://" + "a" * 64 + "/x", "is not a Cloud Storage bucket name", "gs://my-bucket/x"),  # 63 without dots
    ("gs://a." + "b" * 64 + "/x", "is not a Cloud Storage bucket name", "gs://my-bucket/x"),  # 63 between dots
    ("gs://" + ".".join(["c" * 63] * 3) + "." + "d" * 31 + "/x", "is not a Cloud Storage bucket name",
     "gs://my-bucket/x"),  # 222 with dots
]
EMPTY_FOLDERS = [  # gs://b/$UNSET/x: TensorFlow wrote objects named /x/..., beside the folders looked in
    ("gs://my-bucket//runs/1", "gs://my-bucket/runs/1"),
    ("gs://my-bucket/runs//1/", "gs://my-bucket/runs/1"),
]
FINE = ["gs://my-bucket/runs/1", "gs://my-bucket/runs/1/", "gs://my-bucket", "runs/1", "/data/gs:/x", "s3://b/x",
        "gs://abc/x", "gs://" + "a" * 63 + "/x", "gs://" + ".".join(["c" * 63] * 3) + "." + "d" * 30 + "/x"]  # the longest names


@pytest.mark.parametrize("given, why, offered", NEAR_MISSES)
def test_a_near_miss_of_a_gs_url_names_the_url_to_write(given, why, offered):
    problem = paths.url_problem(given)
    assert problem == f"{given!r} is not a gs:// URL but a local path ({why}); write {offered}"
    assert paths.url_like(given)


@pytest.mark.parametrize("given, why, offered", BAD_BUCKETS)
def test_a_bucket_cloud_storage_refuses_is_named_with_the_rule(given, why, offered):
    problem = paths.url_problem(given)
    assert why in problem and paths.BUCKET_RULE in problem and problem.endswith(f"e.g. {offered}")


@pytest.mark.parametrize("given, offered", EMPTY_FOLDERS)
def test_an_empty_folder_name_is_named_with_the_url_to_write(given, offered):
    assert paths.url_problem(given) == f"{given!r} has an empty folder name ('//': a variable not set?); write {offered}"


@pytest.mark.parametrize("given", ["gs://my-bucket/runs\n1", "gs://my-bucket/runs/1\r", "gs://my-bucket/a\x00b"])
def test_a_line_break_or_nul_in_the_object_path_is_refused(given):
    assert paths.url_problem(given) == f"{given!r} has a line break or a NUL byte in its object path; use a path " \
        "without one"


def test_a_job_dir_with_a_trailing_slash_gives_no_empty_folder_name():
    assert paths.checkpoints("gs://my-bucket/runs/1/") == "gs://my-bucket/runs/1/checkpoints"
    assert paths.done_marker("runs/1//") == "runs/1/done.json"


@pytest.mark.parametrize("given", FINE)
def test_well_formed_urls_and_local_paths_pass(given):
    assert paths.url_problem(given) is None


@pytest.mark.parametrize("given, why, offered", NEAR_MISSES[:1] + BAD_BUCKETS[:1])
def test_the_trainers_output_checks_refuse_them_before_tensorflow(given, why, offered):
    """trainer.data --out and make_request --out: one line, exit 2 (the commands), before
    the download; before, `gs:/b/x` passed as a local folder and `gs://` as a URL."""
    assert outputs.unwritable_dir(given) == paths.url_problem(given)
    assert outputs.unwritable_file(given, "request.json") == paths.url_problem(given)


@pytest.mark.parametrize("given", ["s3://bkt/out", "hdfs://namenode/out"])
def test_a_scheme_this_tensorflow_cannot_write_is_refused_before_any_work(given):
    """trainer.data --out, make_request --out and the trainer's --job-dir on s3:// or hdfs://
    (no filesystem for them without tensorflow-io) failed at the write, after the work."""
    problem = f"cannot write {given} (File system scheme '{given.split(':')[0]}' not implemented (file: '{given}')); " \
              "this TensorFlow writes local paths and gs:// only: give one of those"
    assert outputs.unwritable_dir(given) == problem
    assert outputs.unwritable_file(given, "request.json") == problem


@pytest.mark.parametrize("backend", ["k8s", "local"])
@pytest.mark.parametrize("given, why, offered", NEAR_MISSES + BAD_BUCKETS[:3] + [(g, "", o) for g, o in EMPTY_FOLDERS])
def test_submit_refuses_a_malformed_gs_job_dir_before_anything_runs(cli, backend, given, why, offered):
    fake = FakeBackend(name=backend)
    result = cli("submit", "--backend", backend, "--name", "ok", "--job-dir", given, backend=fake)
    assert (result.code, result.out) == (2, "")
    assert result.err.splitlines() == [result.err.strip()] and result.err.startswith("error: --job-dir: ")
    assert offered in result.err
    assert fake.submitted == [] and fake.dry_runs == []


@pytest.mark.parametrize("content, says", [
    (None, "no such file"),
    (b"garbage", "is not a JSON credentials file"),
    (b"[1]", "is not a credentials file"),
    (b'{"client_id": "x"}', 'is not a credentials file (no "type")'),  # a JSON file, not a key
])
def test_a_credentials_file_that_is_none_is_named(tmp_path, monkeypatch, content, says):
    key = tmp_path / "key.json"
    if content is not None:
        key.write_bytes(content)
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(key))
    problem = outputs.credentials_problem()
    assert problem.startswith(f"GOOGLE_APPLICATION_CREDENTIALS={key}") and says in problem
    assert "gcloud auth application-default login" in problem
    assert outputs.unwritable_dir("gs://my-bucket/data") == problem  # before any request


def test_a_credentials_file_or_none_passes(tmp_path, monkeypatch):
    monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS", raising=False)
    assert outputs.credentials_problem() is None
    key = tmp_path / "key.json"
    key.write_text('{"type": "service_account", "project_id": "p"}')
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(key))
    assert outputs.credentials_problem() is None


@pytest.mark.parametrize("given", ["gs:/bkt/x\x1b[2J", "gs://BKT/x\x1b]0;t\x07", "gs://bkt//x\x1b[2J"])
def test_a_refused_url_is_never_echoed_with_what_a_terminal_acts_on(given):
    """The trainer prints these through argparse, without the launcher's error_line: the
    refused value as its repr, the URL offered without the control characters."""
    problem = paths.url_problem(given)
    assert problem and not any(ord(c) < 0x20 or 0x7f <= ord(c) <= 0x9f for c in problem), problem
