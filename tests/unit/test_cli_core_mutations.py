"""The CLI's core (launcher/cli/__init__.py, launcher/backends/__init__.py) where a mutation
audit found no test holding it: whole-number and replica arguments, the local backend the
CLI makes, the cluster settings' bounds through the Python API, a backend that cannot load."""
from __future__ import annotations

import sys

import pytest

from launcher import backends
from launcher.backends.base import BackendError
from launcher.spec import SpecError
from tests.support.fakes.backend import FakeBackend

pytestmark = pytest.mark.usefixtures("cli_env")  # the packaged TFJob CRD, a per-session schema cache


@pytest.mark.parametrize("flags", [["--max-resubmits", "-1"], ["--max-resubmits=-1"], ["--max-resubmits", "+2"]])
def test_max_resubmits_takes_a_whole_number_from_0(cli, flags):
    """A negative count is no count of resubmissions: refused before anything is submitted."""
    backend = FakeBackend(name="k8s")
    line = cli("submit", "--backend", "k8s", "--name", "a", *flags, backend=backend).refused("--max-resubmits")
    assert line.endswith("is not a whole number >= 0; use e.g. 0 or 3")
    assert backend.submitted == [] and backend.dry_runs == []


@pytest.mark.parametrize("replica", ["worker-1x", "chief-0,ps-0", "worker-", "worker-1 "])
def test_logs_refuses_what_is_not_a_replica_whole(cli, replica):
    """--replica is a replica's whole name: one that only starts like one is bad input (exit 2),
    not a request the backend answers with `no such replica` (exit 1)."""
    backend = FakeBackend(name="k8s", existing=("mnist",))
    line = cli("logs", "mnist", "--backend", "k8s", "--replica", replica, backend=backend).refused("--replica")
    assert line == f"error: --replica: {replica!r} is not a replica; use e.g. chief-0, ps-0, worker-1 or all"
    assert backend.log_requests == []


def test_the_clis_local_backend_owns_the_jobs_it_follows():
    """The local backend the CLI makes is a foreground one: a job `submit` follows stops when
    the launcher does (Ctrl-C, a closed terminal, kill -9); the Python API's is not (get_backend's default)."""
    from launcher.cli import _default_factory, build_parser

    args = build_parser().parse_args(["submit", "--backend", "local", "--name", "a"])
    assert _default_factory(args)("local").foreground is True
    assert backends.get_backend("local").foreground is False


@pytest.mark.parametrize("timeout", [0, -1, 0.0, True, "30"])
def test_the_apis_request_timeout_is_positive_seconds(timeout):
    """get_backend's request_timeout, as the CLI's --request-timeout: positive seconds (a bool,
    a string or 0 would reach the Kubernetes client as a timeout of nothing)."""
    with pytest.raises(SpecError) as error:
        backends.get_backend("k8s", request_timeout=timeout)
    assert str(error.value) == f"request_timeout: {timeout!r} is not a timeout; give positive seconds"


def test_a_backend_that_cannot_load_says_how_to_fix_it(cli, monkeypatch):
    """The Kubernetes client missing (a launcher installed without its dependencies): one line
    naming the backend and the fix, exit 1, no traceback."""
    monkeypatch.setitem(sys.modules, "launcher.backends.k8s", None)  # import raises ImportError
    with pytest.raises(BackendError, match=r"^the k8s backend cannot be loaded \(.*\); reinstall the launcher with "
                                           r"its dependencies$"):
        backends.get_backend("k8s")
    result = cli("list", "--backend", "k8s")
    assert (result.code, result.out) == (1, "")
    assert result.err.startswith("error: the k8s backend cannot be loaded (") and result.err.count("\n") == 1, result.err
