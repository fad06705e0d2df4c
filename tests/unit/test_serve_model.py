"""trainer.serve without a running server: which SavedModel and version --model-dir names,
the metadata's shapes, the line of a TensorFlow error a 400 says, and the refusals before
TensorFlow loads (a --name no URL can hold, a port in use). The server itself runs in
tests/integration/test_serve_generic.py."""
from __future__ import annotations

import socket

import pytest
import tensorflow as tf

from trainer.serve import __main__ as serve
from trainer.serve import model


def saved_model(path) -> None:
    path.mkdir(parents=True)
    (path / "saved_model.pb").write_bytes(b"")


def test_the_version_is_the_highest_numeric_dir_or_the_name_of_the_dir_given(tmp_path):
    base = tmp_path / "export"
    for version in ("1700000000", "1700000300"):
        saved_model(base / version)
    (base / "1700000600").mkdir()  # being written: no saved_model.pb yet
    saved_model(base / "temp-1700000900")  # an export's temp dir: no version
    assert model.resolve(str(base) + "/") == (f"{base}/1700000300", "1700000300")
    assert model.resolve(str(base / "1700000000")) == (str(base / "1700000000"), "1700000000")
    saved_model(tmp_path / "mnist-model")  # a SavedModel dir not named by a number: version 1
    assert model.resolve(str(tmp_path / "mnist-model")) == (str(tmp_path / "mnist-model"), "1")


def test_a_model_dir_without_a_savedmodel_or_that_tensorflow_cannot_read_is_one_line(tmp_path):
    with pytest.raises(model.ModelDirError) as refused:
        model.resolve(str(tmp_path))
    assert str(refused.value) == (f"--model-dir: no SavedModel in {tmp_path}; pass the export base (JOB_DIR/export, "
                                  "with numeric version dirs) or one version dir")
    with pytest.raises(model.ModelDirError) as refused:
        model.resolve("s3://bucket/export")
    assert str(refused.value) == ("--model-dir: cannot read s3://bucket/export (File system scheme 's3' not "
                                  "implemented (file: 's3://bucket/export/saved_model.pb')); this TensorFlow reads "
                                  "local paths and gs:// only; copy it to one of those")


def test_metadata_says_an_unknown_dimension_as_minus_1_as_tf_serving_does():
    info = model._tensor_info(tf.TensorSpec([None, 784], tf.float32, name="image"))
    assert info == {"dtype": "DT_FLOAT", "name": "image", "tensor_shape": {
        "dim": [{"size": "-1", "name": ""}, {"size": "784", "name": ""}], "unknown_rank": False}}
    assert model._tensor_info(tf.TensorSpec(None, tf.string))["tensor_shape"] == {"dim": [], "unknown_rank": True}


def test_a_tensorflow_error_is_said_by_its_line_before_the_op_location():
    text = ("Graph execution error:\n\nDetected at node StatefulPartitionedCall defined at ...\n"
            "Input to reshape is a tensor with 3 values, but the requested shape has 784\n"
            "\t [[{{node Reshape}}]] [Op:__inference_signature_wrapper_1234]")
    assert model.tf_message(text) == "Input to reshape is a tensor with 3 values, but the requested shape has 784"
    assert model.tf_message("only line\n") == "only line"


def refused(capsys, argv: list[str]) -> str:
    assert serve.main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1, err
    return err.strip()


def test_a_name_no_url_can_hold_is_refused_before_listening(capsys, monkeypatch):
    monkeypatch.setattr(serve, "listen", lambda *_: pytest.fail("listened despite a bad --name"))
    assert refused(capsys, ["--model-dir", "export", "--name", "my model"]) == (
        "error: --name: 'my model' cannot name a model in a URL; use letters, digits, '-', '_', '.'")


def test_a_port_in_use_is_refused_before_tensorflow_loads(capsys, monkeypatch):
    monkeypatch.setattr(serve, "serve", lambda *_: pytest.fail("served on a port in use"))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        assert refused(capsys, ["--model-dir", "export", "--port", str(port)]) == (
            f"error: --port: 127.0.0.1:{port} is in use; stop what listens there or pick another --port")
