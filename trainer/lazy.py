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

import contextlib
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import re
import sys
import threading
import types

# absl's line prefix: severity, MMDD, HH:MM:SS.micros, thread id, file:line]
_ABSL_LINE = re.compile(rb"([IWEF])\d{4} \d\d:\d\d:\d+\.\d+ +\d+ [^\]\s]+:\d+\] ")  # seconds since 1970 before InitializeLog
_BEFORE_INIT = b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR"
_SEVERITY = {b"I": 0, b"W": 1, b"E": 2, b"F": 3}


def quiet_tensorflow(level: str = "1") -> None:
    """Hide TensorFlow's C++ log lines below `level` (1: INFO hidden, warnings and errors
    stay; 2: warnings hidden too) in this process and its children, unless
    TF_CPP_MIN_LOG_LEVEL is set (0 brings them all back); it takes effect only before
    TensorFlow's import. TensorFlow 2.21 writes some lines before it reads that variable
    (where oneDNN is on by default, e.g. CPUs with AVX-512 VNNI: "oneDNN custom operations
    are on", once per library, after absl's "All log messages before absl::InitializeLog()"):
    those are dropped as its extension modules load (QuietExtensions)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", level)
    if not any(isinstance(finder, QuietExtensions) for finder in sys.meta_path):
        sys.meta_path.insert(0, QuietExtensions())


def shown(line: bytes, level: int) -> bool:
    """Whether a stderr line written while a TensorFlow library loads passes
    TF_CPP_MIN_LOG_LEVEL `level`: absl's lines below it and its note on logging before
    InitializeLog (level >= 1) are not; every other line is."""
    if level >= 1 and line.startswith(_BEFORE_INIT):
        return False
    prefix = _ABSL_LINE.match(line)
    return prefix is None or _SEVERITY[prefix[1]] >= level


@contextlib.contextmanager
def filtered_stderr(level: int):
    """File descriptor 2 through a pipe for the block: each line passed on as it comes
    unless shown() drops it (a thread pumps it, so nothing waits on a full pipe)."""
    sys.stderr.flush()
    saved = os.dup(2)
    read, write = os.pipe()
    os.dup2(write, 2)
    os.close(write)

    def pump():
        with os.fdopen(read, "rb") as source:
            for line in source:
                while line and shown(line, level):
                    line = line[os.write(saved, line):]

    thread = threading.Thread(target=pump, name="quiet-tensorflow", daemon=True)
    thread.start()
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)  # the pipe's last write end closes: the pump reads to its end
        thread.join(timeout=10)
        if not thread.is_alive():  # else a child holds the pipe: leave it its descriptor
            os.close(saved)


class _QuietLoader(importlib.abc.Loader):
    """An extension module's loader whose dlopen and init run under filtered_stderr()."""

    def __init__(self, loader: importlib.machinery.ExtensionFileLoader):
        self.loader = loader

    def __getattr__(self, name: str):  # get_filename(), is_package(), ... as the loader's
        return getattr(self.loader, name)

    def create_module(self, spec):
        return _filtered(self.loader.create_module, spec)

    def exec_module(self, module):
        return _filtered(self.loader.exec_module, module)


_FILTERING = threading.RLock()  # one thread at a time moves fd 2 (another's lines pass through its pipe)


def _filtered(load, argument):
    try:
        level = int(os.environ.get("TF_CPP_MIN_LOG_LEVEL", "0"))
    except ValueError:
        level = 0
    if level <= 0 or not _FILTERING.acquire(blocking=False):  # never waits: a load may import in another thread
        return load(argument)
    try:
        with filtered_stderr(level):
            return load(argument)
    finally:
        _FILTERING.release()


class QuietExtensions(importlib.abc.MetaPathFinder):
    """Finds TensorFlow's extension modules (tensorflow.*.so) as the path finder does,
    loading them through _QuietLoader."""

    def find_spec(self, name, path, target=None):
        if not name.startswith("tensorflow."):
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path, target)
        if spec is None or not isinstance(spec.loader, importlib.machinery.ExtensionFileLoader):
            return None
        spec.loader = _QuietLoader(spec.loader)
        return spec


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
