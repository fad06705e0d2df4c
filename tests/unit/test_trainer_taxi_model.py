"""The taxi wide & deep model: its shape, one preprocessing for training and serving, and
`trainer.predict --json-instances` on raw trip fields (defaults, bad instances)."""
from __future__ import annotations

import json

import numpy as np
import pytest
import tensorflow as tf

from trainer import data, export, models, predict
from trainer.models.taxi import features

REQUIRED = {"trip_miles": 3.1, "trip_seconds": 600, "fare": 10.25, "payment_type": "Credit Card"}


@pytest.fixture(scope="module")
def model():
    return models.build("taxi")


@pytest.fixture(scope="module")
def exported(model, taxi_dir, tmp_path_factory) -> str:  # noqa: F811
    for layer in ("wide_weights", "deep_logit"):  # non-zero weights, so that outputs differ by input
        for weight in model.get_layer(layer).weights:
            weight.assign(0.3 * np.random.RandomState(0).normal(size=weight.shape).astype("float32"))
    return export.export(model, str(tmp_path_factory.mktemp("job")), "taxi", data.Source(taxi_dir))


def test_wide_part_is_one_width_1_table_over_the_sparse_ids(model):
    table = model.get_layer("wide_weights").embeddings
    assert tuple(table.shape) == (sum(features.SIZES[name] for name in features.WIDE) + 1, 1)  # + the bias
    assert {"embed_payment_type", "embed_company", "deep_1", "deep_2"} <= {layer.name for layer in model.layers}


def test_serving_applies_the_training_preprocessing(model, exported, taxi_dir):  # noqa: F811
    spec = models.get("taxi")
    records = next(iter(tf.data.TFRecordDataset(f"{taxi_dir}/eval-00000-of-00001.tfrecord").batch(64)))
    inputs, labels = spec.parser(data.Source(taxi_dir))(records)
    expected = tf.sigmoid(model(inputs, training=False)).numpy()
    raw = tf.io.parse_example(records, features.record_spec())
    raw.pop(features.LABEL)
    outputs = tf.saved_model.load(exported).signatures["serving_default"](**raw)
    np.testing.assert_allclose(outputs["logistic"].numpy()[:, 0], expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(outputs["probabilities"].numpy().sum(axis=1), 1.0, rtol=1e-6)
    assert outputs["classes"].numpy().tolist() == (expected > 0.5).astype(int).tolist()
    assert len(set(np.round(expected, 5))) > 1  # outputs depend on the trip


def test_serving_says_big_tipper_when_its_probability_is_above_one_half():
    """classes agrees with probabilities: a trip at P = 0.55 is class 1 (the model's output pinned by its bias)."""
    from trainer.models import taxi

    model = models.build("taxi")
    layer = model.get_layer("deep_logit")
    for logit, expected in ((0.2, 1), (-0.2, 0)):  # sigmoid: 0.55, 0.45
        layer.kernel.assign(tf.zeros_like(layer.kernel))
        layer.bias.assign([logit])
        stats = {name: {"mean": 0.0, "std": 1.0} for name in features.FLOATS}
        module = taxi.Serving(model, {"vocabulary": {"payment_type": ["Cash"]}, "statistics": stats})
        raw = {name: tf.constant([value], features.RAW[name]) for name, value in features.DEFAULTS.items()}
        outputs = module.serve(raw)
        assert float(outputs["logistic"][0, 0]) == pytest.approx(1 / (1 + np.exp(-logit)), rel=1e-5)
        assert outputs["classes"].numpy().tolist() == [expected]


def run_predict(exported, tmp_path, capsys, *instances) -> tuple[int, str, str]:
    request = tmp_path / "request.json"
    request.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in instances))
    code = predict.main(["--model-dir", exported, "--json-instances", str(request)])
    out, err = capsys.readouterr()
    return code, out, err


def test_predict_on_raw_instances_fills_in_the_defaults(exported, tmp_path, capsys):
    explicit = dict(REQUIRED, company="", trip_start_hour=0, pickup_latitude=0.0)
    cash = dict(REQUIRED, payment_type="Cash", company="Flash Cab", trip_start_hour=19)
    code, out, err = run_predict(exported, tmp_path, capsys, REQUIRED, explicit, cash)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "CLASSES  LOGISTIC  PROBABILITIES" and len(lines) == 4
    rows = [line.split(maxsplit=2) for line in lines[1:]]
    assert rows[0] == rows[1]  # left-out fields are the defaults
    assert rows[0] != rows[2]
    for cls, logistic, probabilities in rows:
        pair = json.loads(probabilities)
        assert pair[1] == pytest.approx(float(logistic), abs=1e-4) and int(cls) == int(float(logistic) > 0.5)


@pytest.mark.parametrize("instance, expected", [
    (dict(REQUIRED, tip=1.0),
     "line 1: 'tip' is not an input of signature 'serving_default' (inputs: company, dropoff_community_area"),
    (dict(REQUIRED, trip_miles="3.1"), "line 1: input 'trip_miles': expects JSON numbers (float32), got strings"),
    (dict(REQUIRED, trip_start_hour=7.5),
     "line 1: input 'trip_start_hour': expects JSON integers (int64), got numbers with a fraction or a decimal point "
     "(7.0)"),
    (dict(REQUIRED, payment_type=1), 'line 1: input \'payment_type\': expects strings (or {"b64": ...} values), got 1'),
    (dict(REQUIRED, fare=True), "line 1: input 'fare': expects JSON numbers (float32), got booleans"),
    ({"trip_miles": 1.0, "trip_seconds": 60, "fare": 5.0},
     "line 1: input 'payment_type' of signature 'serving_default' is missing"),
    ([1.0, 2.0], "line 1: signature 'serving_default' has inputs company,"),
    (dict(REQUIRED, key=7), '--json-instances: the instances carry a "key", which the model does not take'),
    (dict(REQUIRED, key="a7"), 'line 1: key must be an integer, got "a7"'),
    ("{trip", "line 1: not JSON"),
])
def test_bad_instances_are_refused_naming_the_field(exported, tmp_path, capsys, instance, expected):
    code, out, err = run_predict(exported, tmp_path, capsys, instance)
    assert code == 2 and out == ""
    assert expected in err and err.count("\n") == 1, err


def test_preprocessing_gives_an_unknown_payment_type_its_own_id_and_a_constant_number_no_nan():
    """A payment type the training split did not have is the out-of-vocabulary id, not the
    first (most frequent) type's; a float feature of one value (std 0) stays finite."""
    stats = {name: {"mean": 1.0, "std": 2.0} for name in features.FLOATS} | {"fare": {"mean": 7.0, "std": 0.0}}
    preprocess = features.Preprocess({"vocabulary": {"payment_type": ["Cash", "Credit Card"]}, "statistics": stats})
    raw = {name: tf.constant([value, value]) for name, value in features.DEFAULTS.items()}
    raw["payment_type"] = tf.constant(["Credit Card", "Bitcoin"])
    raw["fare"] = tf.constant([7.0, 9.0])
    inputs = preprocess(raw)
    assert inputs["payment_type"].numpy().tolist() == [1, features.PAYMENT_VOCABULARY]
    numeric = inputs["numeric"].numpy()
    assert np.isfinite(numeric).all()
    assert numeric[:, features.FLOATS.index("fare")].tolist() == [0.0, features.CLIP]  # 2 / 1e-6, clipped
    # ids out of their range (an hour 30, a day 0 or -1, an area 99) stay in the embeddings' range
    raw |= {"trip_start_hour": tf.constant([30, -1], tf.int64), "trip_start_day": tf.constant([0, 9], tf.int64),
            "pickup_community_area": tf.constant([99, 77], tf.int64)}
    inputs = preprocess(raw)
    assert [inputs[name].numpy().tolist() for name in ("hour", "day", "pickup_area")] == [[23, 0], [0, 7], [77, 77]]


def test_batch_auc_counts_pairs_ranked_right():
    batch_metrics = models.get("taxi").batch_metrics
    [auc] = batch_metrics(tf.constant([1, 0, 1, 0], tf.int64), tf.constant([0.9, 0.1, 0.2, 0.3]))
    assert float(auc) == pytest.approx(0.75)  # 3 of the 4 (positive, negative) pairs
    [tie] = batch_metrics(tf.constant([1, 0], tf.int64), tf.constant([0.4, 0.4]))
    [one_class] = batch_metrics(tf.constant([1, 1], tf.int64), tf.constant([0.4, 0.1]))
    assert (float(tie), float(one_class)) == (0.5, 0.5)


def test_train_and_eval_lines_carry_the_auc_and_the_launcher_still_reads_them():
    from launcher.events import parse_progress
    from trainer import progress

    line = progress.train_line("chief/0", 200, 1000, 0.23101, 0.9375, 12.34, 16.2, auc=0.91234)
    assert line == ("Train [chief/0] step 200 of 1000: loss 0.2310, accuracy 0.9375, auc 0.9123 (12.3 s) "
                    "16.20 global steps/s")
    parsed = parse_progress(line)
    assert (parsed.step, parsed.loss, parsed.accuracy, parsed.steps_per_sec) == (200, 0.231, 0.9375, 16.2)
    assert progress.eval_line(500, 0.06123, 0.98, auc=0.99) == "Eval step 500: loss 0.0612, accuracy 0.9800, auc 0.9900"


def test_make_request_writes_raw_eval_trips_that_predict_takes(exported, taxi_dir, tmp_path, capsys):  # noqa: F811
    from trainer import make_request

    request = tmp_path / "request.json"
    assert make_request.main(["--model", "taxi", "--data-dir", taxi_dir, "--count", "3", "--out", str(request)]) == 0
    assert "Wrote 3 instances" in capsys.readouterr().out
    rows = [json.loads(line) for line in request.read_text().splitlines()]
    assert len(rows) == 3 and all(set(row) == set(features.RAW) for row in rows)
    assert predict.main(["--model-dir", exported, "--json-instances", str(request)]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 4


def test_records_of_another_layout_are_refused_saying_which_records_the_model_reads(taxi_dir, tmp_path):  # noqa: F811
    """--train_data_paths of image records (MNIST's `image`, `label`) with --model taxi: the
    line ended at the records' features, saying neither what the taxi model reads nor how
    to write it (MNIST's line names --image-feature)."""
    from trainer import flags

    images = tmp_path / "train.tfrecord"
    with tf.io.TFRecordWriter(str(images)) as out:
        out.write(tf.train.Example(features=tf.train.Features(feature={
            "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[bytes(784)])),
            "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[7]))})).SerializeToString())
    args = flags.parse(["--model", "taxi", "--data-dir", taxi_dir, "--train_data_paths", str(images)])
    with pytest.raises(data.DataError) as refused:
        data.check(args)
    assert str(refused.value) == (
        f"--train_data_paths: cannot read {images} as Chicago taxi trips records (Feature: big_tipper (data type: "
        "int64) is required but could not be found.); its records have the features image, label; they are the "
        "records of --model mnist: pass it, or give this model's records")
    # the other way round: MNIST's line said "pass --image-feature NAME" of taxi records
    args = flags.parse(["--model", "mnist", "--data-dir", taxi_dir, "--train_data_paths", f"{taxi_dir}/train-*",
                        "--eval_data_paths", f"{taxi_dir}/eval-*"])
    with pytest.raises(data.DataError) as refused:
        data.check(args)
    assert str(refused.value).endswith("; they are the records of --model taxi: pass it, or give this model's records")
    odd = tmp_path / "odd.tfrecord"  # records of no model here: the model's own hint
    with tf.io.TFRecordWriter(str(odd)) as out:
        out.write(tf.train.Example(features=tf.train.Features(feature={
            "x": tf.train.Feature(int64_list=tf.train.Int64List(value=[7]))})).SerializeToString())
    args = flags.parse(["--model", "taxi", "--data-dir", taxi_dir, "--train_data_paths", str(odd)])
    with pytest.raises(data.DataError) as refused:
        data.check(args)
    assert str(refused.value).endswith("; its records have the features x; give the records `python -m trainer.data "
                                       "--dataset taxi` writes (the raw trip fields and the int64 label big_tipper: "
                                       "tips > 20% of the fare), or the --model of these records")
