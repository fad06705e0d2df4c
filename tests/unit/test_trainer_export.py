"""trainer.export and trainer.predict on a plain (untrained) model."""
from __future__ import annotations

import json

import numpy as np
import pytest
import tensorflow as tf

from trainer import export, models, predict


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> str:
    job_dir = str(tmp_path_factory.mktemp("job"))
    return export.export(models.build("mnist"), job_dir)


def test_export_lands_in_a_timestamped_dir(exported):
    parent, stamp = exported.rsplit("/", 1)
    assert parent.endswith("/export") and stamp.isdigit()
    assert tf.io.gfile.exists(f"{exported}/saved_model.pb")


@pytest.mark.parametrize("shape", [(3, 784), (3, 28, 28), (3, 28, 28, 1)])
def test_serving_default_takes_flat_or_square_images(exported, shape):
    outputs = tf.saved_model.load(exported).signatures["serving_default"](image=tf.zeros(shape))
    assert outputs["classes"].shape == (3,) and outputs["classes"].dtype == tf.int64
    assert outputs["probabilities"].shape == (3, 10)
    np.testing.assert_allclose(outputs["probabilities"].numpy().sum(axis=1), 1.0, rtol=1e-5)
    assert outputs["key"].numpy().tolist() == [0, 1, 2]


def test_keyed_signature_passes_keys_through(exported):
    outputs = tf.saved_model.load(exported).signatures[export.KEYED](
        image=tf.zeros((2, 784)), key=tf.constant([17, 4], tf.int64))
    assert outputs["key"].numpy().tolist() == [17, 4]


def test_predict_prints_classes_and_probabilities(exported, tmp_path, capsys):
    request = tmp_path / "request.json"
    request.write_text(json.dumps({"image": [0.0] * 784, "key": 5}) + "\n"
                       + json.dumps({"image": [[0.5] * 28] * 28, "key": 6}) + "\n")
    assert predict.main(["--model-dir", exported.rsplit("/", 1)[0], "--json-instances", str(request)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "KEY  CLASSES  PROBABILITIES"
    for key, line in zip((5, 6), lines[1:], strict=True):
        fields = line.split(maxsplit=2)
        assert int(fields[0]) == key and 0 <= int(fields[1]) <= 9
        assert len(json.loads(fields[2])) == 10


def test_instances_without_keys_use_serving_default(tmp_path):
    request = tmp_path / "request.json"
    request.write_text(json.dumps([0.1] * 784) + "\n" + json.dumps({"image": [0.2] * 784}) + "\n")
    images, keys = predict.read_instances(str(request))
    assert images.shape == (2, 784) and keys is None


def test_bad_requests_are_refused(tmp_path, exported, capsys):
    request = tmp_path / "request.json"
    for line, expected in ((json.dumps({"pixels": [0.0] * 784}), 'line 1: no "image" field'),
                           (json.dumps({"image": [0.5] * 10}), "line 1: image has 10 values; send 784"),
                           ("{image", "line 1: not JSON")):
        request.write_text(line + "\n")
        assert predict.main(["--model-dir", exported, "--json-instances", str(request)]) == 2
        assert expected in capsys.readouterr().err


def test_missing_model_is_refused(tmp_path, capsys):
    request = tmp_path / "request.json"
    request.write_text(json.dumps([0.0] * 784) + "\n")
    assert predict.main(["--model-dir", str(tmp_path), "--json-instances", str(request)]) == 2
    assert "--model-dir: no SavedModel at" in capsys.readouterr().err


def test_signature_name_picks_the_signature(exported, tmp_path, capsys):
    request = tmp_path / "request.json"
    request.write_text(json.dumps({"image": [0.0] * 784, "key": 5}) + "\n")
    args = ["--model-dir", exported, "--json-instances", str(request)]
    assert predict.main([*args, "--signature-name", "serving_default"]) == 0
    assert capsys.readouterr().out.splitlines()[1].startswith("0    ")  # serving_default numbers the rows
    assert predict.main([*args, "--signature-name", "keyed"]) == 0
    assert capsys.readouterr().out.splitlines()[1].startswith("5    ")
    assert predict.main([*args, "--signature-name", "predict"]) == 2
    assert "--signature-name: the SavedModel has no signature 'predict'; it has keyed, serving_default" in \
        capsys.readouterr().err


@pytest.mark.parametrize("lines, expected", [
    ([{"image": [0.0] * 784, "key": "a7"}], 'line 1: key must be an integer, got "a7"'),
    ([{"image": [0.0] * 784, "key": 1}, {"image": [0.0] * 784}], 'line(s) 2 have no "key" while others do'),
])
def test_string_keys_and_keys_on_some_lines_are_refused(exported, tmp_path, capsys, lines, expected):
    request = tmp_path / "request.json"
    request.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert predict.main(["--model-dir", exported, "--json-instances", str(request)]) == 2
    err = capsys.readouterr().err
    assert expected in err and err.count("\n") == 1
