"""Modules imported when first used.

    tf = lazy.module("tensorflow")

at the top of a command-line module (`python -m trainer.predict`, `trainer.make_request`,
`trainer.data`) lets `--help` and a bad flag answer at once instead of after TensorFlow's
import (3-4 s and its start-up lines on stderr); the first `tf.<name>` imports it.

    lazy.package("tensorflow")

lets a process import parts of a package (`from tensorflow.python.training import
server_lib`) without the package's `__init__`, which for TensorFlow imports its whole API
(and Keras): a ps or worker server then starts in about a second instead of 4-6 (task.serve).
The first read of an attribute of the package itself (`tf.io`, by any code) runs that
`__init__` after all, so nothing else changes.

    lazy.quiet_tensorflow()

first thing in a command's main() hides TensorFlow's C++ INFO lines (CPU features, oneDNN,
"All log messages before absl::InitializeLog()") that its import would print.
"""
from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import threading
import types


def quiet_tensorflow() -> None:
    """Hide TensorFlow's C++ INFO lines (warnings and errors stay) in this process and its
    children; it takes effect only before TensorFlow's import. TF_CPP_MIN_LOG_LEVEL=0
    brings them back."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")


class _Module(types.ModuleType):
    def __getattr__(self, name: str):
        return getattr(importlib.import_module(self.__name__), name)


def module(name: str) -> types.ModuleType:
    """A stand-in for `import name` whose attributes are those of the real module,
    imported on the first attribute read (then served from sys.modules)."""
    return _Module(name)


_INIT_LOCK = threading.RLock()
_PENDING = "_lazy_init_pending"


class _Package(types.ModuleType):
    """The package's own module object, its __init__ not run yet (see package())."""

    def __getattr__(self, name: str):
        with _INIT_LOCK:
            if self.__dict__.pop(_PENDING, False):  # once: an attribute the __init__ itself reads early fails as usual
                self.__spec__.loader.exec_module(self)
                self.__class__ = types.ModuleType
        try:
            return self.__dict__[name]
        except KeyError:
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}") from None


def package(name: str) -> types.ModuleType:
    """Put package `name` into sys.modules with its `__init__` not run until one of its own
    attributes is read (then it runs, in the same module object). A package already
    imported is returned as it is."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    if spec is None or spec.submodule_search_locations is None:
        raise ImportError(f"{name} is not an installed package")
    stand_in = importlib.util.module_from_spec(spec)
    stand_in.__dict__[_PENDING] = True
    stand_in.__class__ = _Package
    sys.modules[name] = stand_in
    return stand_in
