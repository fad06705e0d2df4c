"""How the local backend tells its processes apart and stops them (launcher/backends/local/procs.py),
on real processes: a pid is a process only with its start time (a recycled pid is not the
supervisor or replica it was), and stopping a replica's process group leaves nothing of it,
whether a process in it ignores SIGTERM or all exit at once."""
from __future__ import annotations

import os
import subprocess
import sys
import time

from launcher.backends.local.procs import alive, start_time, terminate_groups
from tests.support.local_jobs import gone
from tests.support.polling import wait_for

# A replica's process group: the leader starts a child that ignores SIGTERM (as a data
# loader or a shell's child may), prints the child's pid, then sleeps (SIGTERM ends it).
STUBBORN = ("import subprocess, sys, time\n"
            "child = subprocess.Popen([sys.executable, '-c', 'import signal, time; "
            "signal.signal(signal.SIGTERM, signal.SIG_IGN); print(1, flush=True); time.sleep(120)'], "
            "stdout=subprocess.PIPE, text=True)\n"
            "child.stdout.readline()\n"  # the child ignores SIGTERM from here on
            "print(child.pid, flush=True)\n"
            "time.sleep(120)\n")


def group(code: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, process_group=0)


def test_a_pid_is_the_process_only_with_its_start_time_and_a_zombie_is_gone():
    me = os.getpid()
    assert alive(me) and alive(me, start_time(me))
    assert not alive(me, start_time(me) + 1)  # the pid of an earlier process, now someone else's
    assert not alive(None) and start_time(2 ** 22 + 1) is None
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # exited, not reaped: a zombie
    try:
        assert not alive(child.pid)
    finally:
        child.wait()


def test_a_process_ignoring_sigterm_is_killed_after_the_grace():
    leader = group(STUBBORN)
    try:
        child = int(leader.stdout.readline())
        terminate_groups([(leader.pid, start_time(leader.pid))], grace=0.5)
        assert leader.wait(timeout=10) < 0
        wait_for(lambda: gone(child), "the child ignoring SIGTERM to be killed", 10)
    finally:
        leader.kill()
        leader.wait()


def test_a_group_that_exits_on_sigterm_is_not_waited_for_the_whole_grace():
    """`delete` and the end of a job return once the replicas exited, not after the grace."""
    leader = group("import time; print(1, flush=True); time.sleep(120)")
    try:
        leader.stdout.readline()
        began = time.monotonic()
        terminate_groups([(leader.pid, start_time(leader.pid))], grace=600)
        assert time.monotonic() - began < 120, "waited out the grace"
        assert leader.wait(timeout=10) == -15
    finally:
        leader.kill()
        leader.wait()


def test_a_recycled_pid_is_not_signalled():
    """A replica recorded as (pid, start) whose pid now names another process: left alone."""
    other = group("import time; print(1, flush=True); time.sleep(120)")
    try:
        other.stdout.readline()
        terminate_groups([(other.pid, start_time(other.pid) - 1)], grace=5)
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()
