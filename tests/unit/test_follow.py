"""launcher.follow.merged: the followed replica's end comes after its last log line.

The phase that says the chief ended comes by the event stream and its last lines by the
log stream; the scripted backends below (test doubles, named as such) make each race
happen in one order for sure, with threading events instead of timing. The real
backends' LogEnded markers are tested in tests/integration (test_local_backend.py,
test_k8s_backend_logs.py)."""
from __future__ import annotations

import threading

from launcher.events import JobCondition, LogEnded, LogLine, ReplicaPhase
from launcher.follow import merged
from tests.support.fakes.backend import STREAM_TIMEOUT, FakeBackend, replica_phase

CHIEF_DONE = replica_phase("chief-0", "Succeeded", exit_code=0)
EVENTS = [JobCondition("Created"), replica_phase("chief-0", "Running"), CHIEF_DONE, JobCondition("Succeeded")]


class ScriptedRace(FakeBackend):
    """FAKE backend whose log stream yields `early` items, waits until the event stream has
    given `chief_end` to the consumer's queue, then yields `late` and stays open until
    `log_end_hold` is set; the event stream waits for `events_wait` before `chief_end`."""

    def __init__(self, early=(), late=(), events=EVENTS, chief_end=CHIEF_DONE,
                 log_end_hold: threading.Event | None = None):
        super().__init__(name="k8s", events=events, existing=("mnist",))
        self.early, self.late, self.chief_end = list(early), list(late), chief_end
        self.chief_end_sent = threading.Event()
        self.events_wait: threading.Event | None = None
        self.log_end_hold = log_end_hold  # the log stream stays open until it is set
        self.log_requests_ends: list[bool] = []
        self.log_timed_out = False

    def events(self, name, namespace, stop=None):
        for event in self.script:
            if event is self.chief_end and self.events_wait is not None:
                assert self.events_wait.wait(STREAM_TIMEOUT)
            yield event
            if event is self.chief_end:
                self.chief_end_sent.set()  # runs once the pump has queued the event

    def logs(self, name, namespace, replica=None, follow=False, options=None, ends=False):
        self.log_requests_ends.append(ends)
        yield from self.early
        if self.late:
            assert self.chief_end_sent.wait(STREAM_TIMEOUT)
            yield from self.late
        if self.log_end_hold is not None:
            self.log_timed_out = not self.log_end_hold.wait(STREAM_TIMEOUT)


def shown(backend, drain_seconds=60.0) -> list:
    return [event for event in merged(backend, "mnist", "default", "chief-0", drain_seconds)
            if isinstance(event, (LogLine, ReplicaPhase, JobCondition))]


def test_the_chiefs_end_waits_for_its_last_log_line():
    last = LogLine("chief-0", "Finished chief/0 at step 60")
    backend = ScriptedRace(early=[LogLine("chief-0", "Train step 60")], late=[last, LogEnded("chief-0", 0)])
    events = shown(backend)
    assert events.index(last) < events.index(CHIEF_DONE) < events.index(JobCondition("Succeeded"))
    assert backend.log_requests_ends == [True]


def test_the_end_of_the_log_stream_releases_the_chiefs_end_without_a_marker():
    last = LogLine("chief-0", "Finished chief/0 at step 60")
    events = shown(ScriptedRace(late=[last]))  # a backend that marks no ends: its stream's end does
    assert events.index(last) < events.index(CHIEF_DONE)


def test_a_log_end_that_came_first_lets_the_chiefs_end_through_at_once():
    """No waiting for a second marker: the log stream stays open until the consumer has
    seen the chief's end (if that waited for the stream, the stream would time out)."""
    seen_end = threading.Event()
    backend = ScriptedRace(early=[LogLine("chief-0", "bye"), LogEnded("chief-0", 0)], log_end_hold=seen_end)
    backend.events_wait = threading.Event()
    events = []
    for event in merged(backend, "mnist", "default", "chief-0", drain_seconds=0.5):
        if isinstance(event, LogLine):
            backend.events_wait.set()  # the marker went into the queue before this line came out
        if event == CHIEF_DONE:
            seen_end.set()
        events.append(event)
    assert not backend.log_timed_out
    assert events.index(LogLine("chief-0", "bye")) < events.index(CHIEF_DONE)


def test_a_log_end_that_came_first_is_not_waited_for_again_until_the_drain_time():
    """The chief's end comes as soon as its phase does when its log had ended already: the
    marker is kept, not waited for a second time until the drain time gives up on it (the
    log stream here stays open until the consumer has seen the chief's end)."""
    seen_end = threading.Event()
    backend = ScriptedRace(early=[LogLine("chief-0", "bye"), LogEnded("chief-0", 0)], log_end_hold=seen_end)
    backend.events_wait = threading.Event()
    for event in merged(backend, "mnist", "default", "chief-0", drain_seconds=4 * STREAM_TIMEOUT):
        if isinstance(event, LogLine):
            backend.events_wait.set()  # the marker went into the queue before this line came out
        if event == CHIEF_DONE:
            seen_end.set()
    assert not backend.log_timed_out


def test_a_restarted_chief_waits_for_the_end_of_its_last_container_not_the_first():
    failed = replica_phase("chief-0", "Failed", restarts=1, exit_code=2)
    events = [JobCondition("Created"), replica_phase("chief-0", "Running", restarts=1), failed, JobCondition("Failed")]
    traceback = LogLine("chief-0", "ValueError: second run")
    backend = ScriptedRace(early=[LogLine("chief-0", "first run"), LogEnded("chief-0", 0)],
                           late=[traceback, LogEnded("chief-0", 1)], events=events, chief_end=failed)
    out = shown(backend)
    assert out.index(traceback) < out.index(failed) < out.index(JobCondition("Failed"))


def test_a_chief_pod_made_anew_waits_for_the_end_of_its_own_log_not_the_first_pods():
    """--restart-policy ExitCode: the operator deletes the failed pod and makes it anew, and
    the new pod's container is again number 0; a second phase of one end (its exit code
    filled in) does not wait again."""
    first_failed = replica_phase("chief-0", "Failed", exit_code=137)
    done = replica_phase("chief-0", "Succeeded", exit_code=0)
    events = [JobCondition("Created"), replica_phase("chief-0", "Running"), first_failed,
              replica_phase("chief-0", "Failed", exit_code=137, message="Error"),
              replica_phase("chief-0", "Pending"), replica_phase("chief-0", "Running"), done, JobCondition("Succeeded")]
    last = LogLine("chief-0", "Finished chief/0 at step 60")
    backend = ScriptedRace(early=[LogLine("chief-0", "Killed"), LogEnded("chief-0", 0),
                                  LogLine("chief-0", "Restored checkpoint")],
                           late=[last, LogEnded("chief-0", 0)], events=events, chief_end=done)
    out = shown(backend)
    assert out.index(LogLine("chief-0", "Killed")) < out.index(first_failed)
    assert out.index(last) < out.index(done) < out.index(JobCondition("Succeeded"))
    assert [event for event in out if isinstance(event, (ReplicaPhase, JobCondition))] == events


def test_a_crashs_traceback_comes_before_the_restart_it_caused():
    restarting = replica_phase("chief-0", "Pending", restarts=1, exit_code=2, message="exited with code 2")
    done = replica_phase("chief-0", "Succeeded", restarts=1, exit_code=0)
    events = [JobCondition("Created"), replica_phase("chief-0", "Running"), restarting,
              replica_phase("chief-0", "Running", restarts=1), done, JobCondition("Succeeded")]
    traceback, last = LogLine("chief-0", "ValueError: no such file"), LogLine("chief-0", "Finished chief/0")
    backend = ScriptedRace(early=[LogLine("chief-0", "first run")],
                           late=[traceback, LogEnded("chief-0", 0), last, LogEnded("chief-0", 1)],
                           events=events, chief_end=restarting)
    out = shown(backend)
    assert out.index(traceback) < out.index(restarting) and out.index(last) < out.index(done)
    assert [event for event in out if isinstance(event, (ReplicaPhase, JobCondition))] == events


def test_a_log_stream_that_never_marks_the_end_holds_events_at_most_drain_seconds():
    hold = threading.Event()
    backend = ScriptedRace(early=[LogLine("chief-0", "working")], log_end_hold=hold)
    try:
        events = shown(backend, drain_seconds=0.5)
    finally:
        hold.set()
    assert events[-2:] == [CHIEF_DONE, JobCondition("Succeeded")]


class SideFails(FakeBackend):
    """FAKE backend whose side replica's log stream fails after one line."""

    def logs(self, name, namespace, replica=None, follow=False, options=None, ends=False):
        if replica == "evaluator-0":
            yield LogLine("evaluator-0", "Eval step 10: loss 0.5000, accuracy 0.8000")
            raise ConnectionError("reset")
        yield from super().logs(name, namespace, replica, follow, options, ends)


def test_a_side_replicas_stream_shows_the_lines_it_keeps_and_its_own_failure():
    backend = SideFails(name="k8s", events=EVENTS, existing=("mnist",), logs={"chief-0": ["bye"]})
    out = [event for event in merged(backend, "mnist", "default", "chief-0", 60.0,
                                     side={"evaluator-0": lambda line: line.startswith("Eval step ")})
           if isinstance(event, LogLine)]
    assert LogLine("chief-0", "bye") in out
    assert [event for event in out if event.replica == "evaluator-0"] == [
        LogLine("evaluator-0", "Eval step 10: loss 0.5000, accuracy 0.8000"),
        LogLine("evaluator-0", "(launcher: log stream failed: reset)")]


class SideLate(FakeBackend):
    """FAKE backend whose side replica's last line comes only after the event stream has
    given the job's terminal condition to the consumer's queue (two streams, either first)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.terminal_sent = threading.Event()

    def events(self, name, namespace, stop=None):
        for event in self.script:
            yield event
            if isinstance(event, JobCondition) and event.terminal:
                self.terminal_sent.set()  # runs once the pump has queued the event

    def logs(self, name, namespace, replica=None, follow=False, options=None, ends=False):
        if replica == "evaluator-0":
            assert self.terminal_sent.wait(STREAM_TIMEOUT)
            yield LogLine("evaluator-0", "Eval step 60: loss 0.0500, accuracy 0.9900")
            return
        yield from super().logs(name, namespace, replica, follow, options, ends)


def test_the_jobs_end_waits_for_a_side_replicas_last_line():
    """The side-car evaluator's last Eval line, written before the job ended, shows before
    the job's end, though its stream delivers it after the terminal condition."""
    backend = SideLate(name="k8s", events=EVENTS, existing=("mnist",), logs={"chief-0": ["bye"]})
    out = [event for event in merged(backend, "mnist", "default", "chief-0", 60.0,
                                     side={"evaluator-0": lambda line: line.startswith("Eval step ")})
           if isinstance(event, (LogLine, JobCondition))]
    assert out.index(LogLine("evaluator-0", "Eval step 60: loss 0.0500, accuracy 0.9900")) \
        < out.index(JobCondition("Succeeded"))
    assert out[-1] == JobCondition("Succeeded")


def test_the_chiefs_final_metrics_and_export_line_become_the_training_result():
    """submit's summary ("test accuracy ..., model exported to ...") comes from these."""
    from launcher.events import TrainingResult

    final = LogLine("chief-0", "Final metrics after 60 steps: loss 0.2500, accuracy 0.9300")
    exported = LogLine("chief-0", "Exported model to /tmp/job/export/1")
    events = list(merged(ScriptedRace(early=[final, exported, LogEnded("chief-0", 0)]), "mnist", "default",
                         "chief-0", 60.0))
    assert [event for event in events if isinstance(event, TrainingResult)] == [
        TrainingResult(step=60, loss=0.25, accuracy=0.93), TrainingResult(export_path="/tmp/job/export/1")]
