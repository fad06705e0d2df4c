"""trainer.train.sync.wait_at_barrier: where TensorFlow's libraries are not where this
Linux build keeps them, TensorFlow's own binding of the barrier is used."""
from __future__ import annotations

import ctypes

from trainer.train import sync


def test_the_barrier_falls_back_to_tensorflows_binding_without_its_linux_libraries(monkeypatch):
    from tensorflow.python.eager import context

    def missing(path, *args, **kwargs):  # as on macOS, whose libraries end in .dylib
        raise OSError(f"{path}: cannot open shared object file")

    calls = []  # a stand-in for the coordination service's barrier: no cluster runs here
    monkeypatch.setattr(ctypes, "CDLL", missing)
    monkeypatch.setattr(context.Context, "wait_at_barrier", lambda self, *args: calls.append(args))
    sync.wait_at_barrier("trainer:finished", 2.5)
    assert calls == [("trainer:finished", 2500)]
