"""trainer.train.sync.wait_at_barrier: where TensorFlow's libraries are not where this
Linux build keeps them, TensorFlow's own binding of the barrier is used."""
from __future__ import annotations

import ctypes
import types

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


def test_the_barrier_falls_back_when_tensorflows_library_lacks_the_symbol(monkeypatch):
    """Another TensorFlow whose library has no TFE_WaitAtBarrier: AttributeError was raised
    out of leave(), after training, and failed the job."""
    from tensorflow.python.eager import context

    class Library:  # a stand-in for a loaded library without the C API's barrier
        def __init__(self, path, *args, **kwargs):
            self.path = path

        def __getattr__(self, name):
            if name == "TFE_WaitAtBarrier":
                raise AttributeError(f"{self.path}: undefined symbol: {name}")
            return types.SimpleNamespace()  # a function whose restype and argtypes are set

    calls = []
    monkeypatch.setattr(ctypes, "CDLL", Library)
    monkeypatch.setattr(context.Context, "wait_at_barrier", lambda self, *args: calls.append(args))
    sync.wait_at_barrier("trainer:finished", 1.0)
    assert calls == [("trainer:finished", 1000)]
