"""Ctrl-C in trainer.data, trainer.predict, trainer.make_request and trainer.serve (still
loading) is the launcher's one line `Interrupted.` on stderr and exit 130, not a
KeyboardInterrupt traceback, and leaves nothing half written (trainer.outputs.command).
trainer.serve once serving still stops on Ctrl-C with `Stopped serving NAME.`, exit 0.
KeyboardInterrupt is raised from a function the command calls: no signals, no sleeps."""
from __future__ import annotations

import os
import types

import numpy as np
import pytest

from trainer import data, make_request, predict
from trainer.models.mnist import source as mnist_source
from trainer.serve import __main__ as serve

INTERRUPTED = ("", "Interrupted.\n")


def run(main, argv: list[str]) -> int:
    """main(argv); a KeyboardInterrupt out of it (a traceback from the command) fails the
    test instead of ending pytest's session."""
    try:
        return main(argv)
    except KeyboardInterrupt:
        pytest.fail("KeyboardInterrupt escaped the command: a traceback, exit 1")


def interrupt(*_, **__):
    raise KeyboardInterrupt


def synthetic(count: int) -> tuple[np.ndarray, np.ndarray]:
    images = (np.arange(count * 784) % 256).astype(np.uint8).reshape(count, 28, 28)
    return images, (np.arange(count) % 10).astype(np.uint8)


def test_data_interrupted_while_writing_leaves_no_staging_dir_and_no_shard(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(mnist_source, "fetch", lambda **_: tmp_path / "raw")
    monkeypatch.setattr(mnist_source, "load", lambda split, raw: synthetic(16 if split == "train" else 4))
    write_split = data.write_split

    def then_interrupt(out, split, images, labels):  # the train shards written, then Ctrl-C
        if split == "test":
            assert len(os.listdir(out)) == 8
            raise KeyboardInterrupt
        return write_split(out, split, images, labels)

    monkeypatch.setattr(data, "write_split", then_interrupt)
    out = tmp_path / "out"
    assert run(data.main, ["--out", str(out), "--offline"]) == 130
    assert capsys.readouterr() == INTERRUPTED
    assert os.listdir(out) == []


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> str:
    out = str(tmp_path_factory.mktemp("mnist"))
    data.write_split(out, "test", *synthetic(12))
    return out


def test_make_request_interrupted_while_reading_writes_nothing(data_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(make_request, "instances", interrupt)
    assert run(make_request.main, ["--data-dir", data_dir, "--out", str(tmp_path / "request.json")]) == 130
    assert capsys.readouterr() == INTERRUPTED
    assert os.listdir(tmp_path) == []


def test_make_request_interrupted_while_writing_keeps_the_earlier_file_and_leaves_no_temporary_file(
        data_dir, tmp_path, monkeypatch, capsys):
    out = tmp_path / "request.json"
    out.write_text('{"earlier": 1}\n')
    real = os.write

    def half_then_interrupt(fd: int, payload) -> int:
        if os.readlink(f"/proc/self/fd/{fd}").startswith(str(tmp_path)):
            real(fd, bytes(payload[:100]))
            raise KeyboardInterrupt
        return real(fd, payload)

    monkeypatch.setattr(os, "write", half_then_interrupt)
    assert run(make_request.main, ["--data-dir", data_dir, "--out", str(out)]) == 130
    assert capsys.readouterr() == INTERRUPTED
    assert os.listdir(tmp_path) == ["request.json"] and out.read_text() == '{"earlier": 1}\n'


def test_predict_interrupted_while_loading_the_model(tmp_path, monkeypatch, capsys):
    request = tmp_path / "request.json"
    request.write_text('{"image": [0.5], "key": 1}\n')
    monkeypatch.setattr(predict, "resolve", interrupt)  # where the SavedModel is looked up and loaded
    assert run(predict.main, ["--model-dir", str(tmp_path), "--json-instances", str(request)]) == 130
    assert capsys.readouterr() == INTERRUPTED


class FakeModel:
    loads = None  # what load() does

    def __init__(self, name: str, model_dir: str):
        self.name, self.path, self.version = name, model_dir, 1

    def load(self):
        return self.loads()


class FakeServer:
    def __init__(self, **_):
        self.dataplane = self.model_repository_extension = None

    def register_model(self, model):
        pass


class FakeRest:
    """kserve's RESTServer: run() ends as uvicorn's does on Ctrl-C, re-raising SIGINT."""

    def __init__(self, *_, **__):
        self.config = types.SimpleNamespace(access_log=True)

    def run(self, sockets):
        raise KeyboardInterrupt


@pytest.fixture
def fake_kserve(monkeypatch):
    from trainer.serve import model

    monkeypatch.setattr(serve, "_import_kserve", lambda: (None, FakeServer, object(), FakeRest))
    monkeypatch.setattr(model, "SavedModel", FakeModel)
    monkeypatch.setattr(model, "add_routes", lambda *_: None)
    monkeypatch.setattr(serve.signal, "signal", lambda *_: None)  # not this process's SIGTERM handler


def test_serve_interrupted_while_loading_the_model(fake_kserve, monkeypatch, capsys):
    monkeypatch.setattr(FakeModel, "loads", staticmethod(interrupt))
    assert run(serve.main, ["--model-dir", "export", "--port", "0"]) == 130
    assert capsys.readouterr() == INTERRUPTED


def test_serve_interrupted_once_serving_stops_serving_with_exit_0(fake_kserve, monkeypatch, capsys):
    """As the README and its --help say: Ctrl-C stops the server, exit 0."""
    monkeypatch.setattr(FakeModel, "loads", staticmethod(lambda: True))
    assert run(serve.main, ["--model-dir", "export", "--name", "mnist", "--port", "0"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("Serving mnist version 1 from export at http://127.0.0.1:")
    assert out.endswith("/v1/models/mnist\nStopped serving mnist.\n") and err == ""
