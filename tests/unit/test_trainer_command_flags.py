"""trainer.predict's and trainer.serve's flags: a bad or missing one is one line in the
command's own style (trainer.flags.Parser's `label`), exit 2, before TensorFlow or a
SavedModel is touched; an empty path is refused, not looked up."""
from __future__ import annotations

import pytest

from trainer import predict
from trainer.serve import __main__ as serve

EMPTY_MODEL_DIR = "--model-dir: is empty; give {} (see --help)"
NOT_A_PORT = "{} is not a TCP port; use 1-65535, or 0 for any free port (see --help)"


@pytest.mark.parametrize("argv, expected", [
    # was `trainer.predict: --model-dir: no SavedModel at ; pass JOB_DIR/export ...`
    (["--model-dir", "", "--json-instances", "request.json"],
     "trainer.predict: " + EMPTY_MODEL_DIR.format("JOB_DIR/export or JOB_DIR/export/<version>")),
    (["--model-dir", "export", "--json-instances", " "],
     "trainer.predict: --json-instances: is empty; give a file with one JSON instance per line (see --help)"),
    # was argparse's usage and error, two lines
    (["--json-instances", "request.json"],
     "trainer.predict: the following arguments are required: --model-dir (see --help)"),
    (["--model-dir", "export", "--json-instances", "request.json", "--signature", "unkeyed"],
     "trainer.predict: unrecognized arguments: --signature unkeyed (did you mean --signature-name?) (see --help)"),
])
def test_predict_refuses_bad_flags_in_one_line(tmp_path, monkeypatch, capsys, argv, expected):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as refused:
        predict.main(argv)
    assert refused.value.code == 2
    assert capsys.readouterr() == ("", expected + "\n")


@pytest.mark.parametrize("argv, expected", [
    (["--model-dir", " "], "error: " + EMPTY_MODEL_DIR.format("an export base or a SavedModel dir")),
    (["--model-dir", "export", "--port", "http"], "error: --port: " + NOT_A_PORT.format("http")),
    (["--model-dir", "export", "--port", "65536"], "error: --port: " + NOT_A_PORT.format("65536")),
    (["--port", "8080"], "error: the following arguments are required: --model-dir (see --help)"),
    # TF Serving's and KServe's spelling of --name: `did you mean --model-dir?`, the nearest spelling, it was
    (["--model-dir", "export", "--model-name", "mnist"],
     "error: unrecognized arguments: --model-name mnist (did you mean --name or --model-dir?) (see --help)"),
    (["--model_name=mnist", "--model-dir", "export"],
     "error: unrecognized arguments: --model_name=mnist (did you mean --name?) (see --help)"),
])
def test_serve_refuses_bad_flags_in_one_line_without_listening(capsys, monkeypatch, argv, expected):
    monkeypatch.setattr(serve, "listen", lambda *_: pytest.fail("listened despite a bad flag"))
    with pytest.raises(SystemExit) as refused:
        serve.main(argv)
    assert refused.value.code == 2
    assert capsys.readouterr() == ("", expected + "\n")


def test_serve_takes_port_zero_and_the_top_port():
    assert serve.parser().parse_args(["--model-dir", "m", "--port", "0"]).port == 0  # a free port the system picks
    assert serve.parser().parse_args(["--model-dir", "m", "--port", "65535"]).port == 65535


def test_predict_skips_a_version_dir_without_its_saved_model(tmp_path):
    """An export being written, or cut off, is a numbered dir without saved_model.pb: predict
    took it as the newest version and failed with a traceback; it serves the one before, as
    trainer.serve does."""
    for version in ("1700000000", "1700000300"):
        (tmp_path / version).mkdir()
    (tmp_path / "1700000000" / "saved_model.pb").write_bytes(b"")
    assert predict.resolve(str(tmp_path)) == f"{tmp_path}/1700000000"
    (tmp_path / "1700000000" / "saved_model.pb").unlink()
    with pytest.raises(predict.RequestError, match=r"^--model-dir: no SavedModel at "):
        predict.resolve(str(tmp_path))
