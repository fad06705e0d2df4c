"""Restart decisions of the local supervisor (training-operator semantics)."""
import pytest

from launcher.backends.local.policy import BACKOFF_CAP, backoff_exceeded, restart_delay, should_restart


@pytest.mark.parametrize("policy, code, restart", [
    ("OnFailure", 1, True), ("OnFailure", 137, True), ("OnFailure", 0, False),
    ("Always", 2, True), ("Always", 0, False),
    ("ExitCode", 1, False), ("ExitCode", 127, False), ("ExitCode", 128, True),
    ("ExitCode", 137, True), ("ExitCode", 143, True), ("ExitCode", 0, False),
    ("Never", 1, False), ("Never", 137, False),
])
def test_should_restart(policy, code, restart):
    assert should_restart(policy, code) is restart


def test_backoff_limit_allows_that_many_restarts():
    assert not backoff_exceeded(None, 1000)
    assert backoff_exceeded(0, 0)
    assert not backoff_exceeded(2, 1)
    assert backoff_exceeded(2, 2)


def test_restart_delay_doubles_and_is_capped():
    assert [restart_delay(n, base=1.0) for n in range(4)] == [1.0, 2.0, 4.0, 8.0]
    assert restart_delay(50, base=1.0) == BACKOFF_CAP


def test_restart_delay_base_from_environment(monkeypatch):
    monkeypatch.setenv("TFJOB_LOCAL_BACKOFF_SECONDS", "0.25")
    assert restart_delay(1) == 0.5


def test_the_first_restart_waits_1_second_by_default(monkeypatch):
    """README: exponential backoff, 1 s doubling, capped at 30 s."""
    monkeypatch.delenv("TFJOB_LOCAL_BACKOFF_SECONDS", raising=False)
    assert [restart_delay(n) for n in range(7)] == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
