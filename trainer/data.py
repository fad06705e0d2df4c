"""MNIST as TFRecord shards: writing them (`python -m trainer.data --out DIR_OR_GS`) and
reading them with tf.data.

MNIST is licensed CC BY-SA 3.0 (Yann LeCun, Corinna Cortes, Christopher J.C. Burges).

Layout written to `--out` (a local path or gs://bucket/path, through tf.io.gfile):
`train-00000-of-00008.tfrecord` ... and `test-00000-of-00002.tfrecord` ..., each record a
tf.train.Example with `image` (784 raw uint8 bytes) and `label` (int64).
"""
from __future__ import annotations

import argparse
import sys

import numpy as np
import tensorflow as tf

from trainer import mnist_source
from trainer.paths import default_data_dir
SHARDS = {"train": 8, "test": 2}
FEATURES = {"image": tf.io.FixedLenFeature([], tf.string),
            "label": tf.io.FixedLenFeature([], tf.int64)}


class DataError(RuntimeError):
    """The data directory is missing or empty; the message says how to create it."""


# ---- writing -----------------------------------------------------------------------
def example(image: np.ndarray, label: int) -> bytes:
    feature = {"image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[image.tobytes()])),
               "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(label)]))}
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def write_split(out: str, split: str, images: np.ndarray, labels: np.ndarray) -> list[str]:
    shards = SHARDS[split]
    paths = []
    for shard in range(shards):
        path = f"{out.rstrip('/')}/{split}-{shard:05d}-of-{shards:05d}.tfrecord"
        with tf.io.TFRecordWriter(path) as writer:
            for index in range(shard, len(labels), shards):
                writer.write(example(images[index], labels[index]))
        paths.append(path)
    return paths


def write(out: str, train_limit: int | None = None, test_limit: int | None = None,
          offline: bool = False) -> dict[str, int]:
    """Write (a slice of) MNIST to `out`; returns the example count per split."""
    raw = mnist_source.fetch(offline=offline)
    tf.io.gfile.makedirs(out)
    counts = {}
    for split, limit in (("train", train_limit), ("test", test_limit)):
        images, labels = mnist_source.load(split, raw)
        images, labels = images[:limit], labels[:limit]
        write_split(out, split, images, labels)
        counts[split] = len(labels)
    return counts


# ---- reading -----------------------------------------------------------------------
def files(data_dir: str, split: str) -> list[str]:
    pattern = f"{data_dir.rstrip('/')}/{split}-*.tfrecord"
    found = tf.io.gfile.glob(pattern) if tf.io.gfile.exists(data_dir) else []
    if not found:
        raise DataError(f"--data-dir: no MNIST {split} records at {data_dir}; "
                        f"create them with: python -m trainer.data --out {data_dir}")
    return sorted(found)


def parse(records: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """A batch of serialized Examples -> (float images [B,28,28,1] in [0,1], int64 labels [B])."""
    parsed = tf.io.parse_example(records, FEATURES)
    images = tf.io.decode_raw(parsed["image"], tf.uint8)
    images = tf.reshape(tf.cast(images, tf.float32) / 255.0, [-1, 28, 28, 1])
    return images, parsed["label"]


def dataset(data_dir: str, split: str, batch_size: int, training: bool, seed: int | None = None,
            threads: int = 0, shard: tuple[int, int] = (1, 0)) -> tf.data.Dataset:
    """Shuffled, repeated batches for training; one ordered pass for evaluation.

    `shard=(count, index)` keeps one input pipeline's share: whole files when there are
    enough of them, else every count-th record of one fixed order of all records (the
    files read in turn, deterministically), so that across the pipelines each record is
    read once per epoch.
    """
    paths = files(data_dir, split)
    count, index = shard
    by_file = len(paths) >= count
    ds = tf.data.Dataset.from_tensor_slices(paths)
    if by_file:
        ds = ds.shard(count, index)
        if training:
            ds = ds.shuffle(len(paths), seed=seed)
    ds = ds.interleave(tf.data.TFRecordDataset, cycle_length=min(4, len(paths)),
                       num_parallel_calls=tf.data.AUTOTUNE, deterministic=not training or not by_file)
    if not by_file:
        ds = ds.shard(count, index)
    if training:
        ds = ds.shuffle(10_000, seed=seed).repeat()
    ds = ds.batch(batch_size, drop_remainder=training).map(parse, num_parallel_calls=tf.data.AUTOTUNE)
    if threads:
        options = tf.data.Options()
        options.threading.private_threadpool_size = threads
        ds = ds.with_options(options)
    return ds.prefetch(tf.data.AUTOTUNE)


# ---- CLI ---------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m trainer.data",
        description="Write MNIST (CC BY-SA 3.0) as TFRecord shards to a local dir or gs:// URL. "
                    "Raw files are cached in $MNIST_CACHE_DIR (default ~/.cache/tfjob-trainer/mnist).")
    parser.add_argument("--out", default=default_data_dir(),
                        help="output dir or gs://bucket/path (default: $MNIST_DATA_DIR or data/mnist)")
    parser.add_argument("--train-limit", type=int, default=None, help="write only the first N training examples")
    parser.add_argument("--test-limit", type=int, default=None, help="write only the first N test examples")
    parser.add_argument("--offline", action="store_true", help="skip the Keras download attempt")
    args = parser.parse_args(argv)
    try:
        counts = write(args.out, args.train_limit, args.test_limit, args.offline)
    except mnist_source.SourceError as error:
        print(f"trainer.data: {error}", file=sys.stderr)
        return 1
    print(f"Wrote {counts['train']} train and {counts['test']} test examples to {args.out}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
