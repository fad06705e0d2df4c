"""Where a cut log stream resumes (launcher/backends/k8s/logs.py): the kubelet's line times
(timestamps=true: Go's RFC3339Nano, whose fraction drops trailing zeros), the sinceTime
asked (whole seconds, as metav1.Time is written), and which container instance a pod's log
serves now, the same as a Table row says (`table.log_instance`)."""
from __future__ import annotations

from launcher.backends.k8s.logs import served_instance, since_time_of, stamped_line


def test_kubelet_times_are_read_whatever_their_fraction_and_ordered_as_times():
    lines = ["2026-11-29T07:40:00Z a", "2026-11-29T07:40:00.000000001Z b", "2026-11-29T07:40:00.1Z c",
             "2026-11-29T07:40:00.123456789Z d", "2026-11-29T08:40:00.5+01:00 e", "2026-11-29T07:40:01Z  f"]
    read = [stamped_line(line) for line in lines]
    assert [text for _, text in read] == ["a", "b", "c", "d", "e", " f"]  # one space is the kubelet's
    times = [stamp for stamp, _ in read]
    assert times == sorted(times) and len(set(times)) == len(times)
    assert times[2] == (times[0][0], 100_000_000) and times[4] == (times[0][0], 500_000_000)
    assert since_time_of(times[3][0]) == "2026-11-29T07:40:00Z"  # the second of the last line: served again


def test_a_line_without_a_time_is_kept_as_it_is():
    assert stamped_line("unable to retrieve container logs for containerd://ab12") == (
        None, "unable to retrieve container logs for containerd://ab12")
    assert stamped_line("2026-11-29 07:40:00 a date of the program's own")[0] is None


def status(state: str, restarts: int, last: bool = False) -> dict:
    states = {"running": {"running": {"startedAt": "2026-11-29T07:40:00Z"}},
              "terminated": {"terminated": {"exitCode": 1}},
              "waiting": {"waiting": {"reason": "CrashLoopBackOff"}}}
    return {"metadata": {"name": "j-worker-0"},
            "spec": {"containers": [{"name": "tensorflow"}]},
            "status": {"containerStatuses": [{"name": "tensorflow", "restartCount": restarts, "state": states[state],
                                              "lastState": {"terminated": {"exitCode": 137}} if last else {}}]}}


def test_the_instance_served_is_the_running_or_ended_one_else_the_one_before():
    assert served_instance(status("running", 0)) == 0
    assert served_instance(status("running", 2, last=True)) == 2
    assert served_instance(status("terminated", 1, last=True)) == 1
    assert served_instance(status("waiting", 1, last=True)) == 0  # CrashLoopBackOff: the one that ended
    assert served_instance(status("waiting", 0)) is None  # ContainerCreating: none has run
    assert served_instance({}) is None  # the pod is gone


def test_a_pod_made_anew_after_the_last_line_is_not_resumed():
    from launcher.backends.k8s.logs import LogStream

    class Api:  # a stand-in: only the log options are read at construction
        log_options: dict = {}

    stream = LogStream(Api(), "j-worker-0", "default", "worker-0", "j-worker-0#0#0", feed=None)
    stream._last = stamped_line("2026-11-29T07:40:00.5Z step")[0]
    made = lambda when: {"metadata": {"creationTimestamp": when}}  # noqa: E731
    assert stream._newer(made("2026-11-29T07:40:01Z"))
    assert not stream._newer(made("2026-11-29T07:40:00Z")) and not stream._newer(made("2026-11-29T07:30:00Z"))
