"""`python -m trainer.data --dataset taxi --out DIR_OR_GS`: the Chicago taxi trips as
TFRecords, with what the model's preprocessing needs.

- Label `big_tipper`: 1 when `tips` > 20% of `fare` (a missing value counts as 0), the
  label of TFX's chicago_taxi_pipeline (`tips > fare * 0.2`) and of the data the AI
  Platform structured sample trains on. Not "tips > 0" (this trainer's label before):
  in this data cash tips are not recorded, so the payment type alone nearly decides
  that one, and a logistic regression on the same features ranks it as well as the
  wide & deep model (bench/taxi_auc.py; README Performance).
- Split: a fixed permutation (numpy seed SEED) of the 15,002 trips; the first
  EVAL_FRACTION of it is the eval split (3,000 trips), the rest train (12,002).
- Missing values become the fields' defaults (features.DEFAULTS: 0 / "").
- `metadata.json`: label, counts, the payment type vocabulary (by frequency) and the
  mean and standard deviation of each float feature (over the trips that have it: a
  missing latitude's 0 then lies far out and is clipped, telling the model it is
  missing), all of the training split only.

Layout: `train-0000N-of-00004.tfrecord`, `eval-00000-of-00001.tfrecord`, `metadata.json`.
"""
from __future__ import annotations

import collections
import json

import numpy as np
import tensorflow as tf

from trainer import data
from trainer.models.taxi import features, source

SEED = 18
EVAL_FRACTION = 0.2
SHARDS = {"train": 4, "eval": 1}
METADATA = "metadata.json"
LABEL_RULE = f"{features.LABEL}: tips > 0.2 * fare"  # metadata.json's "label": records of another rule are refused


def value(row: dict[str, str], name: str):
    """The typed value of one raw field of a CSV row, its default when missing."""
    text = row[name]
    if text == "":
        return features.DEFAULTS[name]
    if name in features.FLOATS:
        return float(text)
    if name in features.INTS:
        return int(float(text))
    return text


def label(row: dict[str, str]) -> int:
    return int(float(row["tips"] or 0) > 0.2 * float(row["fare"] or 0))


def split(rows: list[dict]) -> dict[str, list[dict]]:
    order = np.random.RandomState(SEED).permutation(len(rows))
    cut = int(round(len(rows) * EVAL_FRACTION))
    return {"eval": [rows[i] for i in order[:cut]], "train": [rows[i] for i in order[cut:]]}


def metadata(train: list[dict], counts: dict[str, int]) -> dict:
    """Vocabulary and statistics of the training split."""
    payments = collections.Counter(value(row, "payment_type") for row in train)
    stats = {}
    for name in features.FLOATS:
        values = np.array([value(row, name) for row in train if row[name] != ""], dtype=np.float64)
        stats[name] = {"mean": float(values.mean()), "std": float(values.std())}
    return {"label": LABEL_RULE, "counts": counts,
            "positive_rate": {"train": sum(label(row) for row in train) / len(train)},
            "vocabulary": {"payment_type": [name for name, _ in sorted(payments.items(), key=lambda kv: (-kv[1], kv[0]))]},
            "statistics": stats}


def example(row: dict[str, str]) -> bytes:
    feature = {}
    for name, dtype in features.RAW.items():
        item = value(row, name)
        if dtype == tf.float32:
            feature[name] = tf.train.Feature(float_list=tf.train.FloatList(value=[item]))
        elif dtype == tf.int64:
            feature[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=[item]))
        else:
            feature[name] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[item.encode()]))
    feature[features.LABEL] = tf.train.Feature(int64_list=tf.train.Int64List(value=[label(row)]))
    return data.serialize(tf.train.Example(features=tf.train.Features(feature=feature)))


def write(out: str, rows: list[dict] | None = None) -> dict[str, int]:
    """Write the splits and metadata.json to `out` (local or gs://); returns the counts."""
    parts = split(rows if rows is not None else source.rows())
    counts = {name: len(trips) for name, trips in parts.items()}
    with data.staged(out) as root:
        for name, trips in parts.items():
            shards = SHARDS[name]
            for shard in range(shards):
                with tf.io.TFRecordWriter(f"{root}/{data.shard_name(name, shard, shards)}.tfrecord") as writer:
                    for row in trips[shard::shards]:
                        writer.write(example(row))
        with tf.io.gfile.GFile(f"{root}/{METADATA}", "w") as handle:
            handle.write(json.dumps(metadata(parts["train"], counts), indent=1, sort_keys=True))
    return counts


def read_metadata(data_dir: str) -> dict:
    """metadata.json of `data_dir` (raises data.DataError when absent, or when the records
    carry another label than LABEL_RULE: written by an earlier version)."""
    path = f"{data_dir.rstrip('/')}/{METADATA}"
    rewrite = f"python -m trainer.data --dataset taxi --out {data_dir}"
    try:
        with tf.io.gfile.GFile(path) as handle:
            meta = json.loads(handle.read())
    except tf.errors.NotFoundError:
        raise data.DataError(f"--data-dir: no {METADATA} at {data_dir}; create it with: {rewrite}") from None
    if meta.get("label") != LABEL_RULE:
        raise data.DataError(f"--data-dir: {data_dir} holds records labelled {meta.get('label')!r}, this trainer "
                        f"learns {LABEL_RULE!r}; rewrite them with: {rewrite}")
    return meta
