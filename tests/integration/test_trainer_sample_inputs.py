"""What users of the seeds bring, trained end to end by `python -m trainer.task` in one
process on the real MNIST slice: the Cloud ML samples' --train_data_paths/--eval_data_paths
(file patterns, GZIP `.tfr.gz` records as seed 001's; local and gs:// through TensorFlow's
GCS filesystem and the emulator), and the TensorFlow MNIST tutorials' `train.tfrecords`
(seed 000: `image_raw` bytes, `label`) read with --image-feature image_raw."""
from __future__ import annotations

import gzip
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.trainer_cluster import (ROOT, TEST_SLICE, evaluate_export, export_path, final_metrics, run_module,
                                           trainer_env)

pytestmark = pytest.mark.slow
WAIT_S = 300
GARBAGE = b"not a TFRecord: reading this file fails the job\n" * 8


def short_run(job_dir: Path, *flags: str) -> list[str]:
    return ["--job-dir", str(job_dir), "--train-steps", "30", "--batch-size", "32", "--steps-per-execution", "5",
            "--log-every-steps", "10", "--eval-every-steps", "0", "--checkpoint-every-steps", "0", *flags]


def refusal(done: subprocess.CompletedProcess) -> str:
    """The one `trainer:` line of a run that exited 2 (TensorFlow's own log lines aside)."""
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    lines = [line for line in done.stderr.splitlines() if line.startswith("trainer:")]
    assert len(lines) == 1 and done.stderr.splitlines()[-1] == lines[0], done.stderr[-2000:]
    return lines[0]


def sample_files(mnist_dir: str) -> dict[str, bytes]:
    """Seed 001's layout: 3 GZIP training files named .tfr.gz (750 real MNIST images) and a
    plain evaluation file (250), with decoys beside them that the patterns leave out (and
    that would fail the job if it read them)."""
    source = Path(mnist_dir)
    files = {f"train-{i:05d}-of-00003.tfr.gz": gzip.compress((source / f"train-{i:05d}-of-00008.tfrecord").read_bytes())
             for i in range(3)}
    files["eval-00000-of-00001.tfr"] = (source / "test-00000-of-00002.tfrecord").read_bytes()
    files["train-00003-of-00003.tfr"] = files["eval-00000-of-00001.tfr.partial"] = GARBAGE
    # a --data-dir of shards in the trainer's own names, also unreadable: the patterns replace it
    files["decoy/train-00000-of-00001.tfrecord"] = files["decoy/test-00000-of-00001.tfrecord"] = GARBAGE
    return files


@pytest.mark.parametrize("where", ["local", "gs"])
def test_cloud_ml_sample_patterns_train_on_exactly_the_files_they_match(where, mnist_dir, tmp_path,  # noqa: F811
                                                                       request):
    files = sample_files(mnist_dir)
    if where == "gs":
        gcs = request.getfixturevalue("gcs")
        root, env = gcs.make_bucket("trainer-sample-paths") + "/data", gcs.env
        bucket = gcs.client().bucket("trainer-sample-paths")
        for name, content in files.items():
            bucket.blob(f"data/{name}").upload_from_string(content)
        assert len(gcs.list(root)) == len(files)
    else:
        root, env = str(tmp_path / "data"), None
        for name, content in files.items():
            (tmp_path / "data" / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / "data" / name).write_bytes(content)
    train, evaluation = f"{root}/train-*.tfr.gz", f"{root}/eval-*.tfr"
    job = tmp_path / "job"

    # a pattern that matches nothing: one line, exit 2, nothing written
    missing = f"{root}/test-*.tfr.gz"
    done = run_module("trainer.task", short_run(job, "--data-dir", f"{root}/decoy", "--train_data_paths", train,
                                                "--eval_data_paths", missing), env, timeout=WAIT_S)
    assert refusal(done) == (f"trainer: --eval_data_paths: no files match {missing}; give existing TFRecord files or "
                             "patterns (local or gs://)")
    assert not job.exists()

    done = run_module("trainer.task", short_run(job, "--data-dir", f"{root}/decoy", "--train_data_paths", train,
                                                "--eval_data_paths", evaluation), env, timeout=WAIT_S)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert f"Reading train: 3 files matching {train}; test: 1 file matching {evaluation}\n" in done.stdout
    step, _, accuracy = final_metrics(done.stdout)
    assert step == 30 and accuracy > 0.5, done.stdout[-2000:]
    assert Path(export_path(done.stdout)).parent == job / "export"


# The TensorFlow MNIST tutorials' convert_to_records.py, as seed 000 wrote its data: per
# image height, width, depth, label and image_raw (the uint8 [28, 28, 1] array's bytes).
# Read here from the trainer's shards with TensorFlow's own parsing, not the trainer's.
_TUTORIAL_RECORDS = """
import sys
import numpy as np
import tensorflow as tf
source, out = sys.argv[1], sys.argv[2]
spec = {"image": tf.io.FixedLenFeature([], tf.string), "label": tf.io.FixedLenFeature([], tf.int64)}
int64 = lambda value: tf.train.Feature(int64_list=tf.train.Int64List(value=[value]))
for split, name in (("train", "train.tfrecords"), ("test", "test.tfrecords")):
    with tf.io.TFRecordWriter(f"{out}/{name}") as writer:
        for record in tf.data.TFRecordDataset(sorted(tf.io.gfile.glob(f"{source}/{split}-*.tfrecord"))):
            example = tf.io.parse_single_example(record, spec)
            image = np.frombuffer(example["image"].numpy(), np.uint8).reshape(28, 28, 1)
            feature = {"height": int64(28), "width": int64(28), "depth": int64(1),
                       "label": int64(int(example["label"])),
                       "image_raw": tf.train.Feature(bytes_list=tf.train.BytesList(value=[image.tobytes()]))}
            writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
"""


def test_the_tutorials_image_raw_records_train_and_export_with_image_feature(mnist_dir, tmp_path):  # noqa: F811
    records = tmp_path / "seed"
    records.mkdir()
    written = subprocess.run([sys.executable, "-c", _TUTORIAL_RECORDS, mnist_dir, str(records)], cwd=ROOT,
                             env=trainer_env(), capture_output=True, text=True, timeout=WAIT_S)
    assert written.returncode == 0, written.stderr[-2000:]
    (records / "decoy").mkdir()  # --data-dir's shards, unreadable: the patterns replace them
    for name in ("train-00000-of-00001.tfrecord", "test-00000-of-00001.tfrecord"):
        (records / "decoy" / name).write_bytes(GARBAGE)
    job = tmp_path / "job"
    flags = ["--data-dir", str(records / "decoy"), "--train_data_paths", str(records / "train.tfrecords"),
             "--eval_data_paths", str(records / "test.tfrecords")]

    # without the flag, the records are refused before training: one line naming it
    done = run_module("trainer.task", short_run(job, *flags), timeout=WAIT_S)
    assert refusal(done) == (
        f"trainer: --train_data_paths: cannot read {records}/train.tfrecords as MNIST records (Feature: image (data "
        "type: string) is required but could not be found.); its records have the features depth, height, image_raw, "
        "label, width; pass --image-feature NAME, the feature holding the image's 784 bytes (image_raw in the "
        "TensorFlow MNIST tutorials' records)")
    assert not job.exists()

    done = run_module("trainer.task", short_run(job, *flags, "--image-feature", "image_raw"), timeout=WAIT_S)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert f"Reading train: 1 file matching {records}/train.tfrecords; test: 1 file matching " \
           f"{records}/test.tfrecords\n" in done.stdout
    step, _, accuracy = final_metrics(done.stdout)
    assert step == 30 and accuracy > 0.5, done.stdout[-2000:]
    export = export_path(done.stdout)
    assert Path(export).parent == job / "export"
    # the export, asked about the same 500 test images in the trainer's own records, scores
    # what the chief measured on the tutorials' records: the same pixels and labels
    exported_accuracy, examples = evaluate_export(export, mnist_dir)
    assert examples == TEST_SLICE and abs(exported_accuracy - accuracy) <= 0.00005 + 1e-9, (exported_accuracy, accuracy)
