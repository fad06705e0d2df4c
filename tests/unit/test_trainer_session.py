"""trainer.session on a real single-process Session (plain model, default strategy):
results taken as they complete, and periodic evaluation left to a live side-car evaluator.

The dispatch test hands session.run a stand-in for ClusterCoordinator's RemoteValue
(`Handle`, a test double: nothing real lets a test decide which worker finishes first)."""
from __future__ import annotations

import json
import re
import signal
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
    """TEST DOUBLE of a scheduled call (train/ps.py Call, around a coordinator RemoteValue):
    wait() blocks until `ready` is set; fetch() gives the result, a failed call's None
    (ClusterCoordinator keeps the error for the next schedule), and notes its thread in
    FETCHED_IN. `votes`: the result ends with that count, as a MultiWorkerMirrored call's
    does."""

    def __init__(self, ready: threading.Event, failed: bool = False, votes: float | None = None):
        self.ready, self.failed, self.votes = ready, failed, votes

    def wait(self) -> None:
        if not self.ready.wait(timeout=60):
            raise TimeoutError("never released")

    def fetch(self):
        FETCHED_IN.add(threading.current_thread().name)
        if not self.ready.is_set():
            raise AssertionError("fetched before it finished")
        if self.failed:
            return None
        return (0.5, 0.9) if self.votes is None else (0.5, 0.9, self.votes)


FETCHED_IN: set[str] = set()


def finished() -> threading.Event:
    event = threading.Event()
    event.set()
    return event


def test_results_are_taken_as_they_complete_while_one_call_is_slow(state):
    launched: list[int] = []
    slow = threading.Event()
    done_at_release: list[int] = []

    def launch(n: int, stopping: bool) -> Handle:
        launched.append(n)
        if len(launched) == 1:
            return Handle(slow)  # the oldest call: its worker is slow
        if len(launched) == 6:  # 4 more calls were dispatched and finished meanwhile
            done_at_release.append(int(state.step.numpy()))
            slow.set()
        return Handle(finished())

    FETCHED_IN.clear()
    step, _ = session.run(state, launch, in_flight=2, count=True)
    assert step == 100 and sum(launched) == 100
    assert done_at_release == [40]  # calls 2-5 were counted while call 1 was still out
    assert FETCHED_IN == {threading.main_thread().name}  # the copies one at a time, in the loop's thread


def test_a_failed_call_is_not_counted_and_its_steps_are_scheduled_again(state):
    launched: list[int] = []

    def launch(n: int, stopping: bool) -> Handle:
        launched.append(n)
        return Handle(finished(), failed=len(launched) == 3)

    step, _ = session.run(state, launch, in_flight=2, count=True)
    assert step == 100 and sum(launched) == 110  # the third call's 10 steps ran again


def test_a_failed_calls_error_raised_by_the_next_schedule_ends_the_run(state):
    launched: list[int] = []

    def launch(n: int, stopping: bool) -> Handle:
        if len(launched) == 3:  # ClusterCoordinator.schedule raising the failed closure's error
            raise tf.errors.InternalError(None, None, "Unable to parse request")
        launched.append(n)
        return Handle(finished(), failed=len(launched) == 2)

    with pytest.raises(tf.errors.InternalError):
        session.run(state, launch, in_flight=2, count=True)


@pytest.mark.parametrize("local", [False, True], ids=["a peer's SIGTERM", "this worker's SIGTERM"])
def test_a_stop_vote_saves_the_step_reached_and_stops_every_worker(state, local):
    """MultiWorkerMirrored: a call's all-reduced vote says some worker got SIGTERM; every
    worker saves the same step and stops (exit 143). This worker's own SIGTERM reaches the
    next call as `stopping` and does not stop it alone (its peers would wait for it)."""
    calls: list[bool] = []

    def launch(n: int, stopping: bool) -> Handle:
        calls.append(stopping)
        if local and len(calls) == 2:
            signal.raise_signal(signal.SIGTERM)  # noted by session.run's handler, not acted on alone
        votes = float(stopping) if local else float(len(calls) == 3)  # a peer's vote in call 3
        return Handle(finished(), votes=votes)

    with pytest.raises(session.Stopped) as stopped:
        session.run(state, launch, in_flight=1, count=True, vote=True)  # the double counts no steps itself
    assert calls == ([False, False, True] if local else [False, False, False])
    assert str(stopped.value).startswith(("SIGTERM" if local else "a peer got SIGTERM") + ": saved checkpoint at "
                                         f"step 30 in {state.saver.directory}; exiting 143 (retryable)")
    assert state.saved_at == 30 and tf.train.latest_checkpoint(state.saver.directory).endswith("ckpt-30")
    assert stopped.value.code == 143  # the trainer's exit code (task.train): retryable for ExitCode


def test_periodic_evaluation_is_left_to_a_live_side_car_evaluator(state, capsys):
    state.args.checkpoint_every_steps = 50  # the evaluator evaluates checkpoints
    path = evaluator.alive_path(state.args.job_dir)
    tf.io.gfile.makedirs(path.rsplit("/", 1)[0])
    with tf.io.gfile.GFile(path, "w") as handle:
        handle.write(json.dumps({"time": time.time()}))
    state.at(40, 50)
    out = capsys.readouterr().out
    assert "Side-car evaluator running" in out and "Eval step" not in out

    assert "it evaluates each checkpoint (--checkpoint-every-steps 50), not every --eval-every-steps 50" in out

    state.args.checkpoint_every_steps = 0  # no checkpoints before the last: nothing for it to evaluate meanwhile
    state.at(40, 50)
    assert "Eval step 50: loss" in capsys.readouterr().out
    state.args.checkpoint_every_steps = 50

    tf.io.gfile.remove(path)  # the evaluator is gone: the chief evaluates again
    state.at(40, 50)
    assert "Eval step 50: loss" in capsys.readouterr().out


def blocking_evaluation(state, started: threading.Event, release: threading.Event, error: Exception | None = None):
    """The session's real evaluation, held until `release` (or failing with `error`)."""
    evaluate = state.evaluation.evaluate

    def held():
        started.set()
        if not release.wait(timeout=20):
            raise TimeoutError("the evaluation was never released")
        if error is not None:
            raise error
        return evaluate()

    state.evaluation.evaluate = held


def test_the_coordinator_evaluates_aside_while_dispatch_goes_on(state, capsys):
    """Parameter-server training: the chief's periodic evaluation runs in its own thread,
    so the workers get calls meanwhile; its Eval line comes once it is done, in order,
    before the final evaluation. Without it, dispatch would wait for the evaluation (which
    waits for dispatch here: the evaluation would time out)."""
    state.evaluate_aside = True  # as the chief of parameter-server training sets it
    started, release = threading.Event(), threading.Event()
    blocking_evaluation(state, started, release)
    steps_while_evaluating: list[int] = []

    def launch(n: int, stopping: bool) -> Handle:
        # at step 50 at() handed the evaluation on, before this launch; at most 2 calls were
        # out then, so at least 3 more are launched while it is held
        if int(state.step.numpy()) >= 50 and not release.is_set():
            assert started.wait(timeout=20), "the evaluation at step 50 never began"
            steps_while_evaluating.append(int(state.step.numpy()))
            if len(steps_while_evaluating) == 3:
                release.set()
        return Handle(finished())

    step, _ = session.run(state, launch, in_flight=2, count=True)
    out = capsys.readouterr().out
    assert step == 100
    assert steps_while_evaluating[0] >= 50 and len(steps_while_evaluating) == 3  # the evaluation began at 50
    evals = re.findall(r"^Eval step (\d+): loss", out, re.M)
    assert evals == ["50", "100"], out  # the periodic one, then the final one
    assert out.index("Eval step 50:") < out.index("Final metrics after 100 steps")


def test_an_evaluation_that_fails_aside_ends_the_run_with_its_error(state):
    state.evaluate_aside = True
    started, release = threading.Event(), threading.Event()
    blocking_evaluation(state, started, release, error=tf.errors.UnavailableError(None, None, "test set unreadable"))
    release.set()

    with pytest.raises(tf.errors.UnavailableError, match="test set unreadable"):
        session.run(state, lambda n, stopping: Handle(finished()), in_flight=2, count=True)
    assert started.is_set()


class Remote:
    """TEST DOUBLE of ClusterCoordinator's RemoteValueImpl: its status event (when given)
    and a fetch() that notes each copy."""

    def __init__(self, event: threading.Event | None):
        if event is not None:
            self._status_available_event = event
        self.copies = 0

    def fetch(self):
        self.copies += 1
        return 0.5, 0.9


def test_a_call_waits_on_the_status_event_and_copies_only_when_fetched():
    from tensorflow.python.distribute.coordinator.values import RemoteValueImpl
    from trainer.train.ps import Call

    assert isinstance(RemoteValueImpl(None, None)._status_available_event, threading.Event)  # what Call.wait uses
    remote = Remote(finished())
    call = Call(remote)
    call.wait()
    assert remote.copies == 0  # waiting made no copy
    assert call.fetch() == (0.5, 0.9) and remote.copies == 1
    without = Remote(None)  # a TensorFlow whose RemoteValue has no such event: the copy is made in wait()
    Call(without).wait()
    assert without.copies == 1


def test_the_last_step_has_a_train_line_whatever_the_log_interval(state, capsys):
    """--log-every-steps 1000 with --train-steps 100: the job's only Train line, at its end."""
    step, _ = session.run(state, lambda n, stopping: Handle(finished()), in_flight=1, count=True)
    assert step == 100
    train = [line.split(":")[0] for line in capsys.readouterr().out.splitlines() if line.startswith("Train ")]
    assert train == ["Train [chief/0] step 100 of 100"], train
