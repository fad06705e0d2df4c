"""The job view: plain lines for a scripted event sequence, progress maths, big-job rows,
and the rich live rendering (log lines printed literally, never as markup)."""
from __future__ import annotations

import datetime as dt
import io

from launcher.events import JobCondition, LogLine, Progress
from launcher.view import JobView, ProgressTracker, age, duration, format_rows, replica_rows
from tests.support.fakes.backend import replica_phase

SCRIPT = [
    JobCondition("Created", reason="TFJobCreated", message="TFJob mnist is created."),
    replica_phase("chief-0", "Pending"),
    replica_phase("worker-0", "Running", node="kind-worker"),
    replica_phase("chief-0", "Running", node="kind-worker2"),
    JobCondition("Running", reason="TFJobRunning"),
    LogLine("chief-0", "Train [chief/0] step 10 of 40: loss 1.2000, accuracy 0.5000 (1.0 s)"),
    Progress(step=10, total=40, loss=1.2, accuracy=0.5),
    replica_phase("worker-0", "Failed", restarts=1, exit_code=137, message="OOMKilled"),
    replica_phase("worker-0", "Running", restarts=1, node="kind-worker"),
    Progress(step=30, total=40, loss=0.4, accuracy=0.875),
    # as training-operator ends a job: Running turns False, keeping its reason and message (not printed)
    JobCondition("Running", status="False", reason="TFJobRunning", message="TFJob mnist is running."),
    JobCondition("Succeeded", reason="TFJobSucceeded"),
]

EXPECTED = """\
mnist: Created (TFJobCreated: TFJob mnist is created.)
[chief-0] Pending
[worker-0] Running (node kind-worker)
[chief-0] Running (node kind-worker2)
mnist: Running (TFJobRunning)
[chief-0] Train [chief/0] step 10 of 40: loss 1.2000, accuracy 0.5000 (1.0 s)
[worker-0] Failed (restarts 1, exit code 137, OOMKilled)
[worker-0] Running (restarts 1, node kind-worker)
mnist: Succeeded (TFJobSucceeded)
mnist: Succeeded at step 30 of 40, 8.0 steps/s, ETA 1s, loss 0.4000, accuracy 0.8750
"""


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        self.now += 2.5  # every reading is 2.5 s after the previous one
        return self.now


def test_plain_output_for_a_scripted_run():
    out = io.StringIO()
    with JobView("mnist", "default", out=out, live=False, clock=Clock()) as view:
        for event in SCRIPT:
            view.handle(event)
        view.finish()
    assert out.getvalue() == EXPECTED
    assert view.phase == "Succeeded"
    assert view.replicas["worker-0"].restarts == 1


def test_not_a_tty_means_plain():
    assert JobView("x", "default", out=io.StringIO()).live is False


def test_progress_uses_the_reported_rate_first():
    tracker = ProgressTracker(clock=Clock())
    assert tracker.describe() == "waiting for the first training step"
    tracker.update(Progress(step=200, total=1000, loss=0.231, accuracy=0.9375, steps_per_sec=16.0))
    assert tracker.rate == 16.0
    assert tracker.eta == 50.0
    assert tracker.describe() == "step 200 of 1000, 16.0 steps/s, ETA 50s, loss 0.2310, accuracy 0.9375"


def test_progress_without_total_has_no_eta():
    tracker = ProgressTracker(clock=Clock())
    tracker.update(Progress(step=5))
    tracker.update(Progress(step=15))
    assert tracker.rate == 4.0 and tracker.eta is None
    assert tracker.describe() == "step 15, 4.0 steps/s"


def test_progress_restart_resets_the_rate_baseline():
    tracker = ProgressTracker(clock=Clock())
    tracker.update(Progress(step=100, total=200))
    tracker.update(Progress(step=10, total=200))  # restored from an older checkpoint
    assert tracker.rate is None
    tracker.update(Progress(step=20, total=200))
    assert tracker.rate == 4.0 and tracker.eta == 45.0


def test_durations_and_ages():
    assert [duration(s) for s in (0, 49, 192, 7380)] == ["0s", "49s", "3m12s", "2h03m"]
    assert [duration(s) for s in (62, 3665)] == ["1m02s", "1h01m"]  # aligned in a column, as kubectl's AGE
    now = dt.datetime(2025, 1, 1, 12, 0, 0, tzinfo=dt.timezone.utc)
    assert age("2025-01-01T11:56:48Z", now) == "3m12s"
    assert age("2025-01-01T11:56:48", now) == "3m12s"  # a time without its zone is UTC, not a TypeError
    assert age("", now) == "" and age("yesterday", now) == ""


def test_small_jobs_get_one_row_per_replica():
    rows = replica_rows([replica_phase("chief-0", "Running", node="n1", gpus=1),
                         replica_phase("ps-0", "Pending")])
    assert rows == [("chief-0", "Running", "", "0", "n1", "", "1"), ("ps-0", "Pending", "", "0", "", "", "")]
    assert format_rows(rows) == ["REPLICA   PHASE     REASON   RESTARTS   NODE   AGE   GPU",
                                 "chief-0   Running            0          n1           1",
                                 "ps-0      Pending            0"]


def test_the_reason_column_says_in_a_word_why_a_replica_waits_or_ended():
    """kubectl's STATUS column: the reason a message starts with; the local backend's
    sentences whole."""
    rows = replica_rows([
        replica_phase("worker-0", "Pending", node="n1", message='ImagePullBackOff: Back-off pulling image "x:0"'),
        replica_phase("worker-1", "Pending", message="Unschedulable: 0/1 nodes are available: 1 Insufficient cpu."),
        replica_phase("worker-2", "Running", restarts=3, exit_code=2, message="CrashLoopBackOff: back-off 40s"),
        replica_phase("worker-3", "Failed", exit_code=137, message="OOMKilled"),
        replica_phase("worker-4", "Failed", exit_code=1, message="exited with code 1")])
    assert [row[2] for row in rows] == ["ImagePullBackOff", "Unschedulable", "CrashLoopBackOff", "OOMKilled",
                                        "exited with code 1"]
    wide = replica_rows([replica_phase("worker-0", "Pending", message="ErrImagePull: failed to pull")], wide=True)
    assert wide == [("worker-0", "Pending", "ErrImagePull", "0", "", "", "", "", "ErrImagePull: failed to pull")]


def test_the_reason_of_a_message_without_one_is_the_whole_message():
    """Only a word before ':' (or the whole message) is a reason: a sentence that starts
    with a capital word is not cut to that word."""
    rows = replica_rows([replica_phase("worker-0", "Failed", message="Killed by the launcher after 30 s"),
                         replica_phase("worker-1", "Failed", message="OOMKilled")])
    assert [row[2] for row in rows] == ["Killed by the launcher after 30 s", "OOMKilled"]


def test_up_to_16_replicas_get_a_row_each_more_are_summarised():
    replicas = [replica_phase(f"worker-{i}", "Running") for i in range(16)]
    assert [row[0] for row in replica_rows(replicas)] == [f"worker-{i}" for i in range(16)]
    assert replica_rows([*replicas, replica_phase("worker-16", "Pending")]) == [
        ("worker x17", "16 Running, 1 Pending", "", "0", "", "", "")]


def test_big_jobs_are_summarised_per_type():
    replicas = [replica_phase("chief-0", "Running")]
    replicas += [replica_phase(f"worker-{i}", "Running" if i % 10 else "Pending", restarts=i % 2,
                               message="" if i % 10 else "Unschedulable: 0/3 nodes") for i in range(1000)]
    replicas += [replica_phase(f"ps-{i}", "Running") for i in range(50)]
    assert replica_rows(replicas) == [
        ("chief x1", "1 Running", "", "0", "", "", ""),
        ("worker x1000", "100 Pending, 900 Running", "100 Unschedulable", "500", "", "", ""),
        ("ps x50", "50 Running", "", "0", "", "", ""),
    ]


def test_live_view_renders_table_and_progress_and_prints_logs_literally():
    from rich.console import Console

    out = io.StringIO()
    with JobView("mnist", "default", out=out, live=True, clock=Clock()) as view:
        for event in SCRIPT[:5]:
            view.handle(event)
        view.handle(LogLine("chief-0", "[bold red]not markup[/bold red]"))
        view.handle(Progress(step=20, total=40, loss=0.5, accuracy=0.75, steps_per_sec=10.0))
        frame = io.StringIO()
        Console(file=frame, width=120).print(view._renderable())
    assert "[chief-0] [bold red]not markup[/bold red]" in out.getvalue()
    text = frame.getvalue()
    assert "TFJob mnist (namespace default): Running" in text
    assert "kind-worker2" in text
    assert "step 20 of 40, 10.0 steps/s, ETA 2s, loss 0.5000, accuracy 0.7500" in text


def test_summary_gives_the_models_other_final_metrics_too():
    from launcher.events import parse_result

    out = io.StringIO()
    line = "Final metrics after 300 steps: loss 0.1979, accuracy 0.8957, auc 0.9554"  # the taxi model's
    with JobView("taxi", "default", out=out, live=False, clock=Clock()) as view:
        view.handle(parse_result(line))
        view.handle(JobCondition("Succeeded", reason="TFJobSucceeded"))
        view.finish()
    assert out.getvalue().splitlines()[-1] == (
        "taxi: Succeeded; test accuracy 0.8957, auc 0.9554, loss 0.1979 after 300 steps")


def test_summary_ends_with_test_accuracy_and_export_path():
    from launcher.events import parse_result

    out = io.StringIO()
    lines = ["Final metrics after 300 steps: loss 0.0494, accuracy 0.9844",
             "Exported model to /runs/mnist/output/export/1795318030"]
    with JobView("mnist", "default", out=out, live=False, clock=Clock()) as view:
        for line in lines:
            view.handle(LogLine("chief-0", line))
            view.handle(parse_result(line))
        view.handle(JobCondition("Succeeded", reason="TFJobSucceeded"))
        view.finish()
    assert out.getvalue().splitlines()[-1] == (
        "mnist: Succeeded; test accuracy 0.9844, loss 0.0494 after 300 steps; "
        "model exported to /runs/mnist/output/export/1795318030")


QUEUED = [
    JobCondition("Created", reason="TFJobCreated", message="TFJob mnist is created."),
    JobCondition("Suspended", reason="TFJobSuspended", message="TFJob mnist is suspended."),
    JobCondition("Suspended", status="False", reason="TFJobResumed", message="TFJob mnist is resumed."),
    JobCondition("Running", reason="TFJobRunning"),
]


def test_a_job_queued_for_kueue_is_suspended_from_the_start_until_admitted():
    out = io.StringIO()
    phases = []
    with JobView("mnist", "team", out=out, live=False, suspended=True, queue="team-a") as view:
        phases.append(view.phase)
        for event in QUEUED:
            view.handle(event)
            phases.append(view.phase)
    assert phases == ["Suspended", "Suspended", "Suspended", "Resumed", "Running"]
    lines = out.getvalue().splitlines()
    assert lines[1] == ("mnist: Suspended (queued in Kueue LocalQueue team-a: no pods until Kueue admits it "
                        "(kubectl get workloads -n team))")
    assert lines[2] == "mnist: Resumed (admitted by Kueue)"


def test_the_live_header_says_the_job_waits_in_its_queue():
    from rich.console import Console

    with JobView("mnist", "team", out=io.StringIO(), live=True, suspended=True, queue="team-a") as view:
        view.handle(QUEUED[0])
        frame = io.StringIO()
        Console(file=frame, width=200).print(view._renderable())
    assert "TFJob mnist (namespace team): Suspended, queued in Kueue LocalQueue team-a" in frame.getvalue()


def test_job_phase_of_a_suspended_tfjob():
    from launcher.backends.base import job_phase

    created, suspended, resumed, running = QUEUED
    assert job_phase([], suspended=True) == "Suspended"  # before the operator has seen it
    assert job_phase([created], suspended=True) == "Suspended"
    assert job_phase([created], suspended=False) == "Created"
    assert job_phase([created, suspended]) == "Suspended"
    assert job_phase([created, resumed]) == "Resumed"
    assert job_phase([created, resumed, running]) == "Running"


def test_the_wide_live_table_has_exit_codes_and_messages():
    from rich.console import Console

    with JobView("mnist", "default", out=io.StringIO(), live=True, wide=True) as view:
        view.handle(replica_phase("worker-0", "Failed", restarts=1, exit_code=137, message="OOMKilled"))
        frame = io.StringIO()
        Console(file=frame, width=200).print(view._renderable())
    text = frame.getvalue()
    assert "EXIT CODE" in text and "MESSAGE" in text
    assert "137" in text and "OOMKilled" in text


def test_the_live_table_says_why_a_replica_waits_without_wide():
    from rich.console import Console

    with JobView("mnist", "default", out=io.StringIO(), live=True) as view:
        view.handle(replica_phase("worker-0", "Pending", node="n1",
                                  message='ImagePullBackOff: Back-off pulling image "localhost/tfjob-missing:0"'))
        frame = io.StringIO()
        Console(file=frame, width=200).print(view._renderable())
    header, row = [line.split() for line in frame.getvalue().splitlines()[1:3]]
    assert header[:3] == ["REPLICA", "PHASE", "REASON"] and row[:3] == ["worker-0", "Pending", "ImagePullBackOff"]
    assert "Back-off" not in frame.getvalue()  # the whole message: -o wide


def test_a_plain_line_gives_a_replicas_exit_code_0_too():
    """`[chief-0] Succeeded (exit code 0)`: a script reading the lines sees the code, as for a failure."""
    from launcher.view import plain_line

    assert plain_line(replica_phase("chief-0", "Succeeded", node="n1", exit_code=0), "mnist") == (
        "[chief-0] Succeeded (node n1, exit code 0)")
    assert plain_line(replica_phase("chief-0", "Running", node="n1"), "mnist") == "[chief-0] Running (node n1)"
