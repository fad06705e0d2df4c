"""Restart decisions of the local supervisor, following training-operator v1.9.

- OnFailure / Always: a replica that exits non-zero is restarted.
- ExitCode: restarted only on a retryable code (>= 128: killed by a signal, e.g. 137
  for SIGKILL, 143 for SIGTERM); 1-127 are permanent errors.
- Never: a failed replica fails the job.
A replica that exits 0 is never restarted (the kubelet would restart it under Always; a
finished local process staying finished is the useful reading here).

runPolicy.backoffLimit counts restarts across the whole job (the operator sums the
restart counts of all containers). Locally it is the number of restarts allowed, as in
a Kubernetes Job: the failure that would need restart number backoffLimit + 1 fails
the job instead. Delays grow exponentially per replica, capped.
"""
from __future__ import annotations

import os

RETRYABLE_FROM = 128
BACKOFF_ENV = "TFJOB_LOCAL_BACKOFF_SECONDS"  # first restart delay (default 1 s)
BACKOFF_CAP = 30.0
BACKOFF_RESET_AFTER = 60.0  # a replica that ran this long starts its backoff over


def is_retryable(code: int) -> bool:
    return code >= RETRYABLE_FROM


def should_restart(policy: str, code: int) -> bool:
    if code == 0:
        return False
    if policy in ("OnFailure", "Always"):
        return True
    if policy == "ExitCode":
        return is_retryable(code)
    return False


def backoff_exceeded(limit: int | None, restarts_so_far: int) -> bool:
    """True if one more restart would pass runPolicy.backoffLimit."""
    return limit is not None and restarts_so_far >= int(limit)


def restart_delay(consecutive_failures: int, base: float | None = None) -> float:
    """Seconds to wait before restart number `consecutive_failures + 1` of a replica."""
    if base is None:
        base = float(os.environ.get(BACKOFF_ENV, "1"))
    return min(BACKOFF_CAP, base * (2 ** consecutive_failures))
