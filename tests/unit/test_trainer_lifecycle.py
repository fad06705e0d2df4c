"""trainer.lifecycle: how ps/worker/evaluator tasks learn that the job has ended."""
from __future__ import annotations

import json
import socket

import pytest

from trainer import lifecycle
from tests.support.ports import free_port


@pytest.fixture
def chief():
    """A listening socket standing in for a live chief; yields its address."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield f"127.0.0.1:{sock.getsockname()[1]}"


def test_marker_written_after_start_ends_the_wait(tmp_path, chief):
    watch = lifecycle.Watch(str(tmp_path), chief, poll_seconds=0.01, orphan_seconds=60)
    assert watch.check() is None
    content = lifecycle.write_done(str(tmp_path), step=300, export_path="/x/export/1")
    assert json.loads(content)["step"] == 300
    assert watch.wait() == lifecycle.DONE
    assert lifecycle.EXIT_CODES[lifecycle.DONE] == 0


def test_marker_of_an_earlier_run_does_not_count(tmp_path, chief):
    lifecycle.write_done(str(tmp_path), step=100, export_path=None)
    watch = lifecycle.Watch(str(tmp_path), chief, poll_seconds=0.01, orphan_seconds=60)
    assert watch.check() is None
    lifecycle.write_done(str(tmp_path), step=200, export_path=None)  # same job dir, new run
    assert watch.check() == lifecycle.DONE


def test_chief_gone_for_good_without_marker_is_a_failure(tmp_path):
    watch = lifecycle.Watch(str(tmp_path), f"127.0.0.1:{free_port()}", poll_seconds=0.01, orphan_seconds=0)
    assert watch.wait() == lifecycle.ORPHANED
    assert lifecycle.EXIT_CODES[lifecycle.ORPHANED] == 1
    assert "unreachable" in lifecycle.message(lifecycle.ORPHANED, watch)


def test_chief_gone_after_an_earlier_done_marker_exits_0(tmp_path):
    lifecycle.write_done(str(tmp_path), step=100, export_path=None)
    watch = lifecycle.Watch(str(tmp_path), f"127.0.0.1:{free_port()}", poll_seconds=0.01, orphan_seconds=0)
    assert watch.wait() == lifecycle.ORPHANED_AFTER_DONE
    assert lifecycle.EXIT_CODES[lifecycle.ORPHANED_AFTER_DONE] == 0


def test_reachable_chief_is_never_orphaned(tmp_path, chief):
    watch = lifecycle.Watch(str(tmp_path), chief, poll_seconds=0.01, orphan_seconds=0)
    assert [watch.check() for _ in range(3)] == [None, None, None]
    assert lifecycle.reachable(chief) and not lifecycle.reachable(f"127.0.0.1:{free_port()}")
    assert lifecycle.reachable(None)  # no chief to watch (MultiWorkerMirrored)


def test_a_stop_ends_the_wait_within_a_slice_not_a_poll(tmp_path, chief, monkeypatch):
    """SIGTERM to a ps (the job deleted): it must be noticed while the chief saves, not a poll later."""
    slept = []
    monkeypatch.setattr(lifecycle.time, "sleep", slept.append)
    watch = lifecycle.Watch(str(tmp_path), chief, poll_seconds=60, orphan_seconds=600)
    assert watch.wait(stopping=lambda: len(slept) >= 3) == lifecycle.STOPPED
    assert slept and max(slept) <= lifecycle.SLICE_S  # a poll of 60 s slept in slices, the stop checked between


def test_a_stopped_server_lingers_while_the_chief_is_up_and_leaves_once_it_has_gone(tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        watch = lifecycle.Watch(str(tmp_path), f"127.0.0.1:{sock.getsockname()[1]}", poll_seconds=1,
                                orphan_seconds=600)
        assert watch.linger(bound=0.3) is False  # the chief still up: the bound ends the wait
    assert watch.linger(bound=60) is True  # its address refuses connections now: at once


def test_a_chief_whose_name_does_not_resolve_is_not_taken_as_gone():
    """On a cluster a terminating pod leaves its Service's DNS before its process ends: the
    ps must not leave while the chief may still be saving through the connections it has."""
    assert lifecycle.left(f"127.0.0.1:{free_port()}") is True  # refused: its process has gone
    assert lifecycle.left("chief-0.no-such-name.invalid:2222") is False  # unknown: wait (up to the bound)
    assert lifecycle.left(None) is True


def test_done_says_whether_this_run_was_marked_done(tmp_path, chief):
    """A ps or worker stopped by SIGTERM once the chief marked the job done (the local
    backend stops them so at a job's end) has nothing left to linger for."""
    lifecycle.write_done(str(tmp_path), step=100, export_path=None)  # an earlier run's
    watch = lifecycle.Watch(str(tmp_path), chief, poll_seconds=0.01, orphan_seconds=60)
    assert watch.done() is False
    lifecycle.write_done(str(tmp_path), step=200, export_path=None)
    assert watch.done() is True


def test_the_exit_lines_say_why_the_task_leaves(tmp_path):
    watch = lifecycle.Watch(str(tmp_path), "chief-0:2222", poll_seconds=0.01, orphan_seconds=900)
    assert lifecycle.message(lifecycle.DONE, watch) == (
        f"Chief marked the job done in {tmp_path / 'done.json'}; exiting")
    assert lifecycle.message(lifecycle.ORPHANED, watch) == (
        "Chief chief-0:2222 unreachable for 900 s (job not marked done); exiting")
    assert lifecycle.message(lifecycle.ORPHANED_AFTER_DONE, watch) == (
        "Chief chief-0:2222 unreachable for 900 s (job was marked done); exiting")


def test_a_stopped_server_lingers_within_the_grace_kubernetes_grants():
    """Kubernetes SIGKILLs 30 s after SIGTERM by default: a longer linger dies unheard."""
    assert 0 < lifecycle.LINGER_S < 30
