"""A module imported when first used.

    tf = lazy.module("tensorflow")

at the top of a command-line module (`python -m trainer.predict`, `trainer.make_request`,
`trainer.data`) lets `--help` and a bad flag answer at once instead of after TensorFlow's
import (3-4 s and its start-up lines on stderr); the first `tf.<name>` imports it.
"""
from __future__ import annotations

import importlib
import types


class _Module(types.ModuleType):
    def __getattr__(self, name: str):
        return getattr(importlib.import_module(self.__name__), name)


def module(name: str) -> types.ModuleType:
    """A stand-in for `import name` whose attributes are those of the real module,
    imported on the first attribute read (then served from sys.modules)."""
    return _Module(name)
