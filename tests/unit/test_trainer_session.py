"""trainer.session on a real single-process Session (plain model, default strategy):
results taken as they complete, and periodic evaluation left to a live side-car evaluator.

The dispatch test hands session.run a stand-in for ClusterCoordinator's RemoteValue
(`Handle`, a test double: nothing real lets a test decide which worker finishes first)."""
from __future__ import annotations

import json
import threading
import time

import numpy as np
import pytest
import tensorflow as tf

from trainer import data, evaluator, flags, session
from trainer.cluster import Cluster


@pytest.fixture
def state(tmp_path):
    images = (np.arange(20 * 784) % 256).astype(np.uint8).reshape(20, 28, 28)
    (tmp_path / "data").mkdir()
    data.write_split(str(tmp_path / "data"), "test", images, np.arange(20) % 10)
    data.write_split(str(tmp_path / "data"), "train", images, np.arange(20) % 10)
    args = flags.parse(["--job-dir", str(tmp_path / "job"), "--data-dir", str(tmp_path / "data"),
                        "--train-steps", "100", "--steps-per-execution", "10", "--eval-every-steps", "50",
                        "--checkpoint-every-steps", "0", "--log-every-steps", "1000", "--eval-batch-size", "10",
                        "--histogram-every-steps", "0"])
    return session.start(args, Cluster(), tf.distribute.get_strategy())


class Handle:
    """TEST DOUBLE of a coordinator RemoteValue: fetch() blocks until `ready` is set; a
    failed call's gives None (ClusterCoordinator keeps the error for the next schedule)."""

    def __init__(self, ready: threading.Event, failed: bool = False):
        self.ready, self.failed = ready, failed

    def fetch(self):
        if not self.ready.wait(timeout=60):
            raise TimeoutError("never released")
        return None if self.failed else (0.5, 0.9)


def finished() -> threading.Event:
    event = threading.Event()
    event.set()
    return event


def test_results_are_taken_as_they_complete_while_one_call_is_slow(state):
    launched: list[int] = []
    slow = threading.Event()
    done_at_release: list[int] = []

    def launch(n: int) -> Handle:
        launched.append(n)
        if len(launched) == 1:
            return Handle(slow)  # the oldest call: its worker is slow
        if len(launched) == 6:  # 4 more calls were dispatched and finished meanwhile
            done_at_release.append(int(state.step.numpy()))
            slow.set()
        return Handle(finished())

    step, _ = session.run(state, launch, in_flight=2, count=True)
    assert step == 100 and sum(launched) == 100
    assert done_at_release == [40]  # calls 2-5 were counted while call 1 was still out


def test_a_failed_call_is_not_counted_and_its_steps_are_scheduled_again(state):
    launched: list[int] = []

    def launch(n: int) -> Handle:
        launched.append(n)
        return Handle(finished(), failed=len(launched) == 3)

    step, _ = session.run(state, launch, in_flight=2, count=True)
    assert step == 100 and sum(launched) == 110  # the third call's 10 steps ran again


def test_a_failed_calls_error_raised_by_the_next_schedule_ends_the_run(state):
    launched: list[int] = []

    def launch(n: int) -> Handle:
        if len(launched) == 3:  # ClusterCoordinator.schedule raising the failed closure's error
            raise tf.errors.InternalError(None, None, "Unable to parse request")
        launched.append(n)
        return Handle(finished(), failed=len(launched) == 2)

    with pytest.raises(tf.errors.InternalError):
        session.run(state, launch, in_flight=2, count=True)


def test_periodic_evaluation_is_left_to_a_live_side_car_evaluator(state, capsys):
    path = evaluator.alive_path(state.args.job_dir)
    tf.io.gfile.makedirs(path.rsplit("/", 1)[0])
    with tf.io.gfile.GFile(path, "w") as handle:
        handle.write(json.dumps({"time": time.time()}))
    state.at(40, 50)
    out = capsys.readouterr().out
    assert "Side-car evaluator running" in out and "Eval step" not in out

    tf.io.gfile.remove(path)  # the evaluator is gone: the chief evaluates again
    state.at(40, 50)
    assert "Eval step 50: loss" in capsys.readouterr().out
