"""The one bounded wait of the tests: poll a condition until it holds or a deadline passes.

Tests never sleep to synchronise: they wait for what they need to see, and every wait has a
bound after which the test fails with a message that says what it was waiting for.
"""
from __future__ import annotations

import threading
import time
from typing import Callable, TypeVar, Union

T = TypeVar("T")
INTERVAL_S = 0.1


class WaitTimeout(AssertionError):
    """A bounded wait ran out: a test failure, whose message names what was awaited."""


def wait_for(ready: Callable[[], T], what: Union[str, Callable[[], str]], timeout: float, *,
             check: Callable[[], None] | None = None, interval: float = INTERVAL_S) -> T:
    """Call `ready` every `interval` seconds until it returns something truthy, and return that.

    After `timeout` seconds raise WaitTimeout naming `what`: a string, or a function that
    builds the message when the wait fails (to show logs or state as they are then).
    `check`, if given, runs before each call of `ready` and may raise to stop early (a
    process that died, say)."""
    deadline = time.monotonic() + timeout
    while True:
        if check is not None:
            check()
        value = ready()
        if value:
            return value
        if time.monotonic() > deadline:
            described = what if isinstance(what, str) else what()
            raise WaitTimeout(f"timed out after {timeout:g} s waiting for {described}")
        time.sleep(interval)


def wait_threads_end(before: set[threading.Thread], timeout: float) -> None:
    """Wait until every thread started since `before` (a `set(threading.enumerate())`) has
    ended: a call that returned must not leave its workers (watches, pumps) behind."""
    started = [thread for thread in threading.enumerate() if thread not in before]
    wait_for(lambda: not any(thread.is_alive() for thread in started),
             lambda: "these threads to end: " + ", ".join(t.name for t in started if t.is_alive()), timeout)
