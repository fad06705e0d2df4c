"""`--model taxi`: will a Chicago taxi rider tip more than 20% of the fare (a "big
tipper", the label of TFX's taxi pipeline)? A wide & deep classifier on the
Chicago taxi trips sample (City of Chicago data; see the README's notice), the model of
the AI Platform "structured data" sample and the ST446 seminar.

The model interface (trainer/models/__init__.py): source.py fetches the data, prepare.py
writes the TFRecords and metadata.json, features.py is the preprocessing shared by
tf.data and serving, model.py the Keras model, serving below.

Serving signature `serving_default`: one [N] tensor per raw field of features.RAW
(float32 / int64 / string) -> `logistic` float32 [N,1] (P(big tipper)), `probabilities`
float32 [N,2] (not, big tipper), `classes` int64 [N] (1: big tipper). The SavedModel also
carries `instance_defaults()` (the value of each field a request may leave out) and
`required_fields()`, which `python -m trainer.predict` uses to complete and check json
instances. No `key` input: the structured-data sample's requests are raw trip fields only,
and so are make_request's; a line with a key is refused by trainer.predict in one line
(the MNIST export's keyed `serving_default` is for the image samples' `{"image", "key"}`).
"""
from __future__ import annotations

import keras
import tensorflow as tf

from trainer.models.taxi import features, prepare
from trainer.models.taxi.model import build  # noqa: F401 - the model interface

DATASET = "Chicago taxi trips"
EVAL_SPLIT = "eval"
# the end of the line refusing records the parser cannot read (--train_data_paths of another layout)
RECORDS_HINT = ("give the records `python -m trainer.data --dataset taxi` writes (the raw trip fields and the "
                f"int64 label {features.LABEL}: tips > 20% of the fare), or the --model of these records")


def _data_dir(source) -> str:
    return source if isinstance(source, str) else source.data_dir


def parser(source):
    """fn(serialized batch) -> (model inputs, int64 labels [B]), preprocessing included."""
    preprocess = features.Preprocess(prepare.read_metadata(_data_dir(source)))
    spec = features.record_spec()

    def parse(records):
        parsed = tf.io.parse_example(records, spec)
        label = parsed.pop(features.LABEL)
        return preprocess(parsed), label

    return parse


def loss_and_hits(model: keras.Model, inputs, labels, training: bool):
    logits = model(inputs, training=training)
    labels = tf.cast(labels, tf.float32)
    losses = tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits)
    hits = tf.cast(tf.equal(tf.cast(logits > 0, tf.float32), labels), tf.float32)
    return losses, hits, logits


TRAIN_METRICS = ("auc",)


def batch_metrics(labels, logits):
    """The AUC of one batch (the share of (positive, negative) pairs ranked right, ties
    half; 0.5 when the batch lacks one of the classes); Train lines show its mean over
    the batches since the last line, the Eval lines the AUC of the whole eval split."""
    positive = tf.equal(labels, 1)
    pos, neg = tf.boolean_mask(logits, positive), tf.boolean_mask(logits, tf.logical_not(positive))
    pairs = tf.cast(tf.size(pos) * tf.size(neg), tf.float32)
    right = tf.cast(pos[:, None] > neg[None, :], tf.float32) + 0.5 * tf.cast(pos[:, None] == neg[None, :], tf.float32)
    return (tf.where(pairs > 0, tf.reduce_sum(right) / tf.maximum(pairs, 1.0), 0.5),)


def metrics() -> dict:
    return {"auc": keras.metrics.AUC(num_thresholds=1000, name="auc")}


def scores(logits):
    return tf.sigmoid(logits)


def input_spec():
    return features.input_spec()


RAW_SIGNATURE = {name: tf.TensorSpec([None], dtype, name=name) for name, dtype in features.RAW.items()}


class Serving(tf.Module):
    def __init__(self, model: keras.Model, metadata: dict):
        super().__init__()
        self.model = model
        self.preprocess = features.Preprocess(metadata)

    @tf.function(input_signature=[RAW_SIGNATURE])
    def serve(self, raw):
        logistic = tf.sigmoid(self.model(self.preprocess(raw), training=False))[:, None]
        return {"logistic": logistic, "probabilities": tf.concat([1 - logistic, logistic], axis=1),
                "classes": tf.cast(logistic[:, 0] > 0.5, tf.int64)}

    @tf.function(input_signature=[])
    def instance_defaults(self):
        return {name: tf.constant(value, features.RAW[name]) for name, value in features.DEFAULTS.items()}

    @tf.function(input_signature=[])
    def required_fields(self):
        return tf.constant(features.REQUIRED)


def serving(model: keras.Model, source):
    module = Serving(model, prepare.read_metadata(_data_dir(source)))
    return module, {"serving_default": module.serve}


def request_instances(data_dir: str, count: int, keys: bool = False) -> tuple[list[dict], list[int]]:
    """(json instances of raw trip fields, true labels) of the first `count` eval trips;
    data.DataError for a dir without them, or whose metadata.json names another label."""
    from trainer import data

    paths = data.files(data.Source(data_dir, dataset=DATASET, prepare="--dataset taxi "), EVAL_SPLIT)
    prepare.read_metadata(data_dir)  # records of another label (an earlier version's): refused, how to rewrite them
    records = next(iter(tf.data.Dataset.from_tensor_slices(paths).flat_map(data.records).batch(count)))  # .gz too
    parsed = tf.io.parse_example(records, features.record_spec())
    labels = [int(v) for v in parsed.pop(features.LABEL).numpy()]
    rows = []
    for index in range(len(labels)):
        row = {}
        for name, values in parsed.items():
            value = values.numpy()[index]
            row[name] = value.decode() if isinstance(value, bytes) else round(float(value), 6) \
                if features.RAW[name] == tf.float32 else int(value)
        rows.append(row)
    return rows, labels


def prepare_data(out: str) -> dict[str, int]:
    return prepare.write(out)
