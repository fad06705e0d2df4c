"""`python -m trainer.data --dataset taxi` on the real CSV of the tfx 1.21.0 wheel: counts,
the seeded split, the label, and vocabulary and statistics of the training split only; a
wheel whose sha256 is not the pinned one refused."""
from __future__ import annotations

import collections
import json
import os
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from tests.support.trainer_cluster import run_module
from trainer.models.taxi import features, prepare, source

BIG_TIPPERS = 3374  # trips of data.csv with tips > 20% of the fare
TIPPED = 4743  # trips with tips > 0: not the label


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    return source.rows()  # the wheel cached by the taxi_dir fixture, or fetched now


def read(data_dir: str, split: str) -> dict[str, np.ndarray]:
    """{field: values} of every record of `split`."""
    paths = sorted(tf.io.gfile.glob(f"{data_dir}/{split}-*.tfrecord"))
    batches = tf.data.TFRecordDataset(paths).batch(20_000).map(lambda r: tf.io.parse_example(r, features.record_spec()))
    [columns] = list(batches)
    return {name: values.numpy() for name, values in columns.items()}


def test_the_csv_is_the_pinned_sample(rows):
    assert len(rows) == 15002 and tuple(rows[0]) == source.COLUMNS and len(source.COLUMNS) == 18
    assert sum(prepare.label(row) for row in rows) == BIG_TIPPERS
    assert sum(float(row["tips"] or 0) > 0 for row in rows) == TIPPED


def test_records_split_counts_and_labels(taxi_dir):  # noqa: F811
    train, evaluation = read(taxi_dir, "train"), read(taxi_dir, "eval")
    label = features.LABEL
    assert (len(train[label]), len(evaluation[label])) == (12002, 3000)
    assert len(tf.io.gfile.glob(f"{taxi_dir}/train-*.tfrecord")) == prepare.SHARDS["train"]
    assert int(train[label].sum() + evaluation[label].sum()) == BIG_TIPPERS
    assert set(evaluation["payment_type"]) <= {b"Cash", b"Credit Card", b"No Charge", b"Unknown", b"Dispute",
                                               b"Pcard", b"Prcard"}
    meta = json.loads(open(f"{taxi_dir}/metadata.json").read())
    assert meta["counts"] == {"train": 12002, "eval": 3000} and meta["label"] == "big_tipper: tips > 0.2 * fare"


def test_split_is_fixed_disjoint_and_complete(rows):
    tagged = [dict(row, index=str(i)) for i, row in enumerate(rows)]
    first, again = prepare.split(tagged), prepare.split(tagged)
    ids = {name: [row["index"] for row in part] for name, part in first.items()}
    assert ids == {name: [row["index"] for row in part] for name, part in again.items()}
    assert not set(ids["train"]) & set(ids["eval"])
    assert sorted(map(int, ids["train"] + ids["eval"])) == list(range(len(rows)))


def test_vocabulary_and_statistics_come_from_the_training_split_only(rows, taxi_dir):  # noqa: F811
    meta = json.loads(open(f"{taxi_dir}/metadata.json").read())
    train = prepare.split(rows)["train"]
    counts = collections.Counter(row["payment_type"] for row in train)
    assert meta["vocabulary"]["payment_type"] == sorted(counts, key=lambda name: (-counts[name], name))
    assert meta["vocabulary"]["payment_type"][:2] == ["Cash", "Credit Card"]
    miles = np.array([float(row["trip_miles"]) for row in train])
    everywhere = np.array([float(row["trip_miles"]) for row in rows])
    assert meta["statistics"]["trip_miles"]["mean"] == pytest.approx(miles.mean())
    assert meta["statistics"]["trip_miles"]["std"] == pytest.approx(miles.std())
    assert abs(miles.mean() - everywhere.mean()) > 1e-6  # so the test tells the two apart
    # over the trips that have the value: a missing latitude's 0 then lies far out (README, prepare.py)
    given = np.array([float(row["dropoff_latitude"]) for row in train if row["dropoff_latitude"] != ""])
    assert 0 < len(given) < len(train)
    assert meta["statistics"]["dropoff_latitude"]["mean"] == pytest.approx(given.mean())
    assert meta["statistics"]["dropoff_latitude"]["std"] == pytest.approx(given.std())


def test_the_label_is_a_tip_above_a_fifth_of_the_fare():
    assert prepare.label({"tips": "2.01", "fare": "10.0"}) == 1
    assert prepare.label({"tips": "2.0", "fare": "10.0"}) == 0  # not above: equal
    assert prepare.label({"tips": "", "fare": "10.0"}) == 0  # missing tips: none recorded
    assert prepare.label({"tips": "1.0", "fare": ""}) == 1


def test_a_trip_record_is_the_same_bytes_in_every_process():
    """Replicas preparing one shared data dir (--prepare-data) write the same files: a record's
    features in name order (deterministic serialization), not the process's hash order."""
    row = {column: "1" for column in source.COLUMNS} | {"payment_type": "Cash", "company": "Flash Cab"}
    record = prepare.example(row)
    names = sorted([*features.RAW, features.LABEL])
    positions = [record.index(name.encode()) for name in names]
    assert positions == sorted(positions)
    assert record == tf.train.Example.FromString(record).SerializeToString(deterministic=True)


def test_a_cached_wheel_that_is_not_the_pinned_one_is_fetched_again(tmp_path, monkeypatch):
    """A wheel cut short or changed in $TAXI_CACHE_DIR is not read: downloaded (and checked) anew."""
    monkeypatch.setenv("TAXI_CACHE_DIR", str(tmp_path))
    (tmp_path / source.WHEEL).write_bytes(b"cut short")
    fetched = []
    monkeypatch.setattr(source, "download", lambda directory: fetched.append(directory) or directory / source.WHEEL)
    assert source.fetch() == tmp_path / source.WHEEL and fetched == [tmp_path]  # a stand-in download, named so


def test_missing_values_get_the_defaults(rows):
    row = next(r for r in rows if r["company"] == "" and r["dropoff_latitude"] == "")
    assert prepare.value(row, "company") == "" and prepare.value(row, "dropoff_latitude") == 0.0
    assert prepare.value({"trip_start_hour": "19"}, "trip_start_hour") == 19


def test_without_metadata_the_data_dir_error_says_how_to_write_it(tmp_path):
    from trainer.data import DataError

    with pytest.raises(DataError, match=r"^--data-dir: no metadata.json at .*; create it with: "
                                        r"python -m trainer\.data --dataset taxi --out "):
        prepare.read_metadata(str(tmp_path))


def test_records_of_another_label_are_refused_with_how_to_rewrite_them(taxi_dir, tmp_path):  # noqa: F811
    from trainer.data import DataError

    meta = json.loads(open(f"{taxi_dir}/metadata.json").read())
    assert prepare.read_metadata(taxi_dir) == meta
    (tmp_path / "metadata.json").write_text(json.dumps(dict(meta, label="tipped: tips > 0")))
    with pytest.raises(DataError, match=r"^--data-dir: .* holds records labelled 'tipped: tips > 0', this trainer "
                                        r"learns 'big_tipper: tips > 0\.2 \* fare'; rewrite them with: "
                                        r"python -m trainer\.data --dataset taxi --out "):
        prepare.read_metadata(str(tmp_path))


def tampered_wheel(index: Path) -> Path:
    """A test double of the tfx 1.21.0 wheel, named and laid out as the real one (metadata,
    the CSV member with its header) but with other trips: its sha256 is not the pinned one."""
    wheel = index / source.WHEEL
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr(source.MEMBER, ",".join(source.COLUMNS) + "\n" + ",".join("1" for _ in source.COLUMNS) + "\n")
        archive.writestr("tfx-1.21.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: tfx\nVersion: 1.21.0\n")
        archive.writestr("tfx-1.21.0.dist-info/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        archive.writestr("tfx-1.21.0.dist-info/RECORD", "")
    return wheel


def test_a_wheel_whose_sha256_is_not_the_pinned_one_is_refused_and_nothing_written(tmp_path):
    index, cache, out = tmp_path / "index", tmp_path / "cache", tmp_path / "out"
    index.mkdir()
    digest = source.sha256(tampered_wheel(index))
    # real pip, pointed at a local index that holds only the tampered wheel
    env = {"TAXI_CACHE_DIR": str(cache), "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(index)}
    done = run_module("trainer.data", ["--dataset", "taxi", "--out", str(out)], env, timeout=600)
    assert done.returncode == 1, done.stdout + done.stderr
    ours = [line for line in done.stderr.splitlines() if line.startswith("trainer.data:")]
    assert ours == [done.stderr.splitlines()[-1]] == [
        f"trainer.data: pip download tfx==1.21.0 gave a {source.WHEEL} with sha256 {digest}, not the pinned "
        f"{source.WHEEL_SHA256}: refused, nothing written; check which index pip uses (pip config list, "
        "PIP_INDEX_URL, PIP_FIND_LINKS)"], done.stderr[-2000:]
    assert not out.exists() and not [path for path in cache.rglob("*") if not path.is_dir()]
    assert "Wrote" not in done.stdout


def test_request_instances_read_gzip_eval_records_as_the_data_dir_does(taxi_dir, tmp_path):  # noqa: F811
    """make_request --model taxi read the eval shards with a plain TFRecordDataset: GZIP
    `.tfrecord.gz` shards, which training reads, failed with a DataLossError traceback."""
    from trainer.models import taxi

    gz = tmp_path / "gz"
    gz.mkdir()
    (gz / "metadata.json").write_bytes((Path(taxi_dir) / "metadata.json").read_bytes())
    for path in sorted(Path(taxi_dir).glob("eval-*.tfrecord")):
        with tf.io.TFRecordWriter(str(gz / f"{path.name}.gz"), options="GZIP") as out:
            for record in tf.data.TFRecordDataset(str(path)):
                out.write(record.numpy())
    assert taxi.request_instances(str(gz), 5) == taxi.request_instances(taxi_dir, 5)


def test_a_taxi_request_has_no_keys_with_or_without_no_keys(taxi_dir, tmp_path, capsys):  # noqa: F811
    """The taxi serving signature takes no `key` (trainer.predict refuses a keyed trip):
    `--no-keys` asks for what its lines always are."""
    from trainer import make_request

    lines = []
    for keys in ([], ["--no-keys"]):
        assert make_request.main(["--model", "taxi", "--data-dir", taxi_dir, "--count", "2", "--out", "-", *keys]) == 0
        lines.append(capsys.readouterr().out.splitlines())
    assert lines[0] == lines[1] and len(lines[0]) == 2
    assert all("key" not in json.loads(line) and "trip_miles" in json.loads(line) for line in lines[0])


def test_make_request_on_records_of_an_earlier_label_says_how_to_rewrite_them(taxi_dir, tmp_path, capsys):  # noqa: F811
    """Records an earlier version wrote (label `tipped`: tips > 0): trainer.task refuses them
    with the command that rewrites them, make_request said `cannot read the eval records ...
    ({{function_node __wrapped__ParseExampleV2...}} Feature: big_tipper ...)` and `give the
    dir python -m trainer.data wrote`, which it was."""
    from trainer import make_request

    old = tmp_path / "old"
    old.mkdir()
    meta = json.loads((Path(taxi_dir) / "metadata.json").read_text())
    (old / "metadata.json").write_text(json.dumps(dict(meta, label="tipped: tips > 0")))
    for path in sorted(Path(taxi_dir).glob("eval-*.tfrecord")):
        with tf.io.TFRecordWriter(str(old / path.name)) as out:
            for record in tf.data.TFRecordDataset(str(path)).take(5):
                example = tf.train.Example.FromString(record.numpy())
                example.features.feature["tipped"].CopyFrom(example.features.feature.pop(features.LABEL))
                out.write(example.SerializeToString())
    trips = tmp_path / "trips.json"
    assert make_request.main(["--model", "taxi", "--data-dir", str(old), "--out", str(trips)]) == 2
    assert capsys.readouterr() == ("", f"trainer.make_request: --data-dir: {old} holds records labelled 'tipped: "
                                       "tips > 0', this trainer learns 'big_tipper: tips > 0.2 * fare'; rewrite them "
                                       f"with: python -m trainer.data --dataset taxi --out {old}\n")
    assert not trips.exists()


def test_a_pip_download_that_never_finishes_is_one_line_and_leaves_nothing(tmp_path, monkeypatch, capsys):
    """pip against an index that accepts and never answers (a hung mirror or proxy): the
    subprocess timeout raised TimeoutExpired, a traceback out of trainer.data (after 600 s,
    without a word on what it was waiting for)."""
    from tests.support.silent_server import SilentServer
    from trainer import models

    monkeypatch.setattr(models, "PIP_TIMEOUT", 5)
    for name in ("PIP_FIND_LINKS", "PIP_NO_INDEX", "PIP_EXTRA_INDEX_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)  # no configured index or find-links of this machine
    monkeypatch.setenv("PIP_NO_CACHE_DIR", "1")
    temp = tmp_path / "tmp"  # pip's own temporary folders (pip-download-*), which a killed pip left in /tmp
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    cache = tmp_path / "cache"
    with SilentServer() as index:
        monkeypatch.setenv("PIP_INDEX_URL", f"{index.url}/simple")
        with pytest.raises(source.SourceError) as refused:
            source.download(cache)
    assert str(refused.value) == (
        "pip download tfx==1.21.0 did not finish in 5 s; check the package index settings (pip config list, "
        f"PIP_INDEX_URL, a proxy), or put {source.WHEEL} into {cache}")
    assert capsys.readouterr().err == f"Fetching the taxi trips: pip download tfx==1.21.0 (7.5 MB, once; kept in " \
                                      f"{cache})\n"
    assert list(cache.iterdir()) == [] and list(temp.iterdir()) == []
