"""KubernetesBackend.logs -f over the FAKE API server: it waits for Pending pods, follows
restarted containers and recreated pods, and ends when the job is terminal and the logs
are drained: container instances written step by step, which KWOK does not do on demand.
The logs of one replica or of all that started, and the replica-name refusals, run against
the real control plane in tests/e2e/test_k8s_backend.py."""
from __future__ import annotations

import pytest

from launcher.backends.base import BackendError, LogOptions
from launcher.backends.k8s import logs
from launcher.events import LogEnded, LogLine
from tests.support.k8s_backend import WAIT, Collector, manifest, watches_open
from tests.support.polling import wait_for


def lines_of(items: list, replica: str) -> list[str]:
    return [item.line for item in items if isinstance(item, LogLine) and item.replica == replica]


def test_follow_waits_for_pending_pods_and_follows_a_restarted_container(k8s_backend, fake_apiserver, fake_operator):
    k8s_backend.submit(manifest(workers=1, ps=0))
    fake_operator.create_pods("mnist")  # both Pending: nothing to read yet
    follow = Collector(k8s_backend.logs("mnist", "default", follow=True))
    wait_for(lambda: fake_apiserver.open_watches == 2, "the follower's watches", WAIT)

    fake_operator.start("mnist-worker-0")
    fake_operator.log("mnist-worker-0", "first run 1", "first run 2")
    follow.wait_for(lambda it: lines_of(it, "worker-0") == ["first run 1", "first run 2"], "the first run's lines")
    fake_operator.log("mnist-worker-0", "first run 3")
    fake_operator.crash("mnist-worker-0", 1)  # OnFailure: the kubelet restarts the container in place
    fake_operator.start("mnist-worker-0")
    fake_operator.log("mnist-worker-0", "second run 1")
    follow.wait_for(lambda it: "second run 1" in lines_of(it, "worker-0"), "the restarted container's lines")

    fake_operator.start("mnist-chief-0")
    fake_operator.log("mnist-chief-0", "chief 1")
    follow.wait_for(lambda it: lines_of(it, "chief-0") == ["chief 1"], "the chief, Pending until now")
    for pod in ("mnist-worker-0", "mnist-chief-0"):
        fake_operator.log(pod, "bye")
        fake_operator.exit(pod, 0)
    fake_operator.set_condition("mnist", "Succeeded")

    items = follow.wait_done()
    assert lines_of(items, "worker-0") == ["first run 1", "first run 2", "first run 3", "second run 1", "bye"]
    assert lines_of(items, "chief-0") == ["chief 1", "bye"]


def test_follow_with_ends_marks_the_end_of_each_container_after_its_last_line(k8s_backend, fake_operator):
    """The live view's stream: a LogEnded per container instance, numbered by the restarts
    before it, after its last line: a restart in place, then a pod the operator recreated."""
    k8s_backend.submit(manifest(workers=1, ps=0, chief=0, restart_policy="ExitCode"))
    fake_operator.create_pods("mnist")
    fake_operator.start("mnist-worker-0")
    fake_operator.log("mnist-worker-0", "first")
    follow = Collector(k8s_backend.logs("mnist", "default", replica="worker-0", follow=True, ends=True))
    plain = Collector(k8s_backend.logs("mnist", "default", replica="worker-0", follow=True))
    for collector in (follow, plain):
        collector.wait_for(lambda it: LogLine("worker-0", "first") in it, "the first container's line")
    fake_operator.log("mnist-worker-0", "first, last line")
    fake_operator.crash("mnist-worker-0", 1)  # the kubelet restarts it in place (restarts 1)
    fake_operator.start("mnist-worker-0")
    fake_operator.log("mnist-worker-0", "second")
    for collector in (follow, plain):  # both read it before the pod and its logs go
        collector.wait_for(lambda it: LogLine("worker-0", "second") in it, "the restarted container's line")
    fake_operator.exit("mnist-worker-0", 137)  # retryable: the operator deletes and recreates the pod
    fake_operator.delete_pod("mnist-worker-0")
    fake_operator.create_pod(fake_operator.server.get("tfjobs", "default", "mnist"), "Worker", 0)
    fake_operator.start("mnist-worker-0")
    fake_operator.log("mnist-worker-0", "new pod")
    # the new pod read before the job ends: a job that turns terminal before the pod watch
    # has shown the old pod's deletion is a race of its own (see the README's Failures)
    for collector in (follow, plain):
        collector.wait_for(lambda it: LogLine("worker-0", "new pod") in it, "the new pod's line")
    fake_operator.exit("mnist-worker-0", 0)
    fake_operator.set_condition("mnist", "Succeeded")
    assert follow.wait_done() == [LogLine("worker-0", "first"), LogLine("worker-0", "first, last line"),
                                  LogEnded("worker-0", 0), LogLine("worker-0", "second"), LogEnded("worker-0", 1),
                                  LogLine("worker-0", "new pod"), LogEnded("worker-0", 0)]
    assert plain.wait_done() == [item for item in follow.wait_done() if isinstance(item, LogLine)]


def test_a_pod_made_anew_that_the_pod_watch_shows_after_the_job_ended_is_read(k8s_backend, fake_apiserver,
                                                                               fake_operator):
    """The TFJob watch shows Succeeded before the pod watch (another watch cache) shows the
    old pod's deletion: the final list alone cannot tell the new pod, whose row looks like
    the old pod's first container (restarts 0), so the follower waits for the pod watch."""
    k8s_backend.log_drain_seconds = 60.0  # the bound of that wait: far beyond what the test needs
    k8s_backend.submit(manifest(workers=1, ps=0, chief=0, restart_policy="ExitCode"))
    fake_operator.create_pods("mnist")
    fake_operator.start("mnist-worker-0")
    fake_operator.log("mnist-worker-0", "old pod")
    follow = Collector(k8s_backend.logs("mnist", "default", replica="worker-0", follow=True, ends=True))
    follow.wait_for(lambda it: LogLine("worker-0", "old pod") in it, "the old pod's line")
    lists = fake_apiserver.count("pods", "list")
    fake_apiserver.lag_watches("pods")
    try:
        fake_operator.exit("mnist-worker-0", 137)  # retryable: the operator deletes and recreates the pod
        fake_operator.delete_pod("mnist-worker-0")
        fake_operator.create_pod(fake_operator.server.get("tfjobs", "default", "mnist"), "Worker", 0)
        fake_operator.start("mnist-worker-0")
        fake_operator.log("mnist-worker-0", "new pod")
        fake_operator.exit("mnist-worker-0", 0)
        fake_operator.set_condition("mnist", "Succeeded")
        wait_for(lambda: fake_apiserver.count("pods", "list") > lists, "the follower's list of the pods at the end", WAIT)
    finally:
        fake_apiserver.lag_watches("pods", lag=False)
    assert follow.wait_done() == [LogLine("worker-0", "old pod"), LogEnded("worker-0", 0),
                                  LogLine("worker-0", "new pod"), LogEnded("worker-0", 0)]


def test_a_pod_watch_past_the_final_list_ends_the_follow_though_its_rows_differ(k8s_backend, fake_apiserver,
                                                                                fake_operator):
    """The pod watch's resourceVersion tells that it has caught up: here the ps pod, running
    at the end, is deleted after the follower's final list (cleanPodPolicy Running), and the
    pod watch, held back until then, is listed anew (410 Gone after a compaction): the rows
    it shows never equal the final list's, and the follow ends at that list, long before
    the drain time."""
    k8s_backend.log_drain_seconds = 60.0  # far beyond the Collector's WAIT: only the version can end it in time
    k8s_backend.submit(manifest(workers=1, ps=1))
    fake_operator.create_pods("mnist")
    for pod in ("mnist-chief-0", "mnist-worker-0", "mnist-ps-0"):
        fake_operator.start(pod)
        fake_operator.log(pod, f"{pod} line")
    follow = Collector(k8s_backend.logs("mnist", "default", follow=True))
    follow.wait_for(lambda it: len(it) == 3, "the three lines")
    lists = fake_apiserver.count("pods", "list")
    fake_apiserver.lag_watches("pods")
    try:
        for pod in ("mnist-chief-0", "mnist-worker-0"):
            fake_operator.exit(pod, 0)
        fake_operator.set_condition("mnist", "Succeeded")
        wait_for(lambda: fake_apiserver.count("pods", "list") > lists, "the follower's list of the pods at the end", WAIT)
        fake_operator.delete_pod("mnist-ps-0")
        fake_apiserver.compact()
        fake_apiserver.drop_watches()
        assert sorted(follow.wait_done(), key=repr) == [LogLine("chief-0", "mnist-chief-0 line"),
                                                        LogLine("ps-0", "mnist-ps-0 line"),
                                                        LogLine("worker-0", "mnist-worker-0 line")]
    finally:
        fake_apiserver.lag_watches("pods", lag=False)


def test_a_pod_watch_that_does_not_catch_up_is_waited_for_at_most_the_drain_time(k8s_backend, fake_apiserver,
                                                                                 fake_operator):
    """Then the pods as the final list shows them: a replica the pod watch still shows
    Pending ran and ended, and its log is read."""
    k8s_backend.log_drain_seconds = 0.5
    k8s_backend.submit(manifest(workers=1, ps=0, chief=0))
    fake_operator.create_pods("mnist")
    follow = Collector(k8s_backend.logs("mnist", "default", follow=True))
    wait_for(lambda: fake_apiserver.open_watches == 2, "the follower's watches", WAIT)
    fake_apiserver.lag_watches("pods")
    try:
        fake_operator.start("mnist-worker-0")
        fake_operator.log("mnist-worker-0", "only line")
        fake_operator.exit("mnist-worker-0", 0)
        fake_operator.set_condition("mnist", "Succeeded")
        items = follow.wait_done()
    finally:
        fake_apiserver.lag_watches("pods", lag=False)
    assert items == [LogLine("worker-0", "only line")]


REFUSAL = "trainer: argument --train-steps: must be > 0, got -5"


def crash_looping(k8s_backend, fake_operator) -> str:
    """worker-0 of a submitted job ran once, printed REFUSAL and waits to restart
    (CrashLoopBackOff); returns that container's ID."""
    k8s_backend.submit(manifest(workers=1, ps=0, chief=0))
    fake_operator.create_pods("mnist")
    container = fake_operator.start("mnist-worker-0")
    fake_operator.log("mnist-worker-0", REFUSAL)
    fake_operator.crash("mnist-worker-0", 2)
    return container


def test_previous_of_a_replica_that_never_restarted_is_one_error_as_on_the_local_backend(k8s_backend, fake_apiserver,
                                                                                         fake_operator):
    """The kubelet answers 400 for it, which was read as 'went back to waiting': nothing
    printed, exit 0. One replica: the local backend's line; every replica: those with a
    container before their current one (none here), no error."""
    k8s_backend.submit(manifest(workers=1, ps=0, chief=0))
    fake_operator.create_pods("mnist")
    fake_operator.start("mnist-worker-0")
    fake_operator.log("mnist-worker-0", "first run")
    previous = LogOptions(previous=True)
    with pytest.raises(BackendError, match=r"^replica worker-0 has no container before its current one \(restarts "
                                           r"0\)$"):
        list(k8s_backend.logs("mnist", "default", replica="worker-0", options=previous))
    assert list(k8s_backend.logs("mnist", "default", replica="all", options=previous)) == []
    assert lines_of(list(k8s_backend.logs("mnist", "default", replica="worker-0")), "worker-0") == ["first run"]


def test_a_log_the_kubelet_answers_for_a_removed_container_is_asked_again(k8s_backend, fake_apiserver, fake_operator,
                                                                          monkeypatch):
    """The kubelet's status still names a container its garbage collection removed after a
    restart: the answer is a 200 with the kubelet's error as the whole body (tests/node
    met it under CrashLoopBackOff). It is asked again until the kubelet serves the log, and
    never shown as a log line; a container that stays gone is one error line."""
    monkeypatch.setattr(logs, "LOST_RETRY_S", 0.05)
    container = crash_looping(k8s_backend, fake_operator)
    fake_apiserver.lose_log(container, 2)
    assert lines_of(list(k8s_backend.logs("mnist", "default", replica="worker-0")), "worker-0") == [REFUSAL]
    assert fake_apiserver.lost_answers_left(container) == 0

    fake_apiserver.lose_log(container, logs.LOST_RETRIES + 1)
    with pytest.raises(BackendError, match=r"^reading the log of mnist-worker-0: the kubelet answered 'unable to "
                                           rf"retrieve container logs for {container}' {logs.LOST_RETRIES + 1} times"
                                           r" over 0.25 s: the container it names is gone \(removed after a "
                                           r"restart\); try again$"):
        list(k8s_backend.logs("mnist", "default", replica="worker-0"))


def test_previous_of_a_container_the_kubelet_removed_in_a_crash_loop_reads_the_last_one_with_a_note(
        k8s_backend, fake_apiserver, fake_operator):
    """Under OnFailure the restarted container exits again: until its back-off ends the
    kubelet's status names, as the last state, the container it removed at that exit, and
    `previous` is lost on every answer (tests/node met it for most of a crash loop). The
    last container's log is read instead, once, and a note says so; while the status still
    says the container runs, `previous` is the one before, as the kubelet serves it."""
    notes: list[str] = []
    k8s_backend.note = notes.append
    first = crash_looping(k8s_backend, fake_operator)
    fake_operator.start("mnist-worker-0")
    fake_operator.log("mnist-worker-0", "second run")
    previous = LogOptions(previous=True)
    assert lines_of(list(k8s_backend.logs("mnist", "default", replica="worker-0", options=previous)),
                    "worker-0") == [REFUSAL]
    assert notes == []

    fake_operator.exit_in_back_off("mnist-worker-0", 2)
    assert lines_of(list(k8s_backend.logs("mnist", "default", replica="worker-0", options=previous)),
                    "worker-0") == ["second run"]
    assert notes == ["note: worker-0: the kubelet no longer has the previous container (it keeps the last exited one "
                     "only); this is the log of the last container, which exited with code 2"]
    assert fake_apiserver.logs[first].removed  # the double served `previous` as lost, not the old lines


def test_following_a_container_the_kubelet_lost_shows_no_error_line_and_follows_the_next(k8s_backend, fake_apiserver,
                                                                                          fake_operator):
    container = crash_looping(k8s_backend, fake_operator)
    fake_apiserver.lose_log(container, 1)
    follow = Collector(k8s_backend.logs("mnist", "default", replica="worker-0", follow=True))
    wait_for(lambda: fake_apiserver.lost_answers_left(container) == 0, "the follower asked for the lost log", WAIT)
    fake_operator.start("mnist-worker-0")  # the kubelet restarts it
    fake_operator.log("mnist-worker-0", "second run")
    follow.wait_for(lambda it: "second run" in lines_of(it, "worker-0"), "the restarted container's line")
    fake_operator.exit("mnist-worker-0", 0)
    fake_operator.set_condition("mnist", "Succeeded")
    assert lines_of(follow.wait_done(), "worker-0") == ["second run"]


def test_follow_reads_a_pod_the_operator_recreated(k8s_backend, fake_apiserver, fake_operator):
    k8s_backend.submit(manifest(workers=1, ps=0, chief=0, restart_policy="ExitCode"))
    fake_operator.create_pods("mnist")
    fake_operator.start("mnist-worker-0")
    fake_operator.log("mnist-worker-0", "old pod")
    follow = Collector(k8s_backend.logs("mnist", "default", replica="worker-0", follow=True))
    follow.wait_for(lambda it: lines_of(it, "worker-0") == ["old pod"], "the first pod's line")
    fake_operator.exit("mnist-worker-0", 137)  # retryable: the operator deletes and recreates the pod
    fake_operator.delete_pod("mnist-worker-0")
    fake_operator.create_pod(fake_apiserver.get("tfjobs", "default", "mnist"), "Worker", 0)
    fake_operator.start("mnist-worker-0")
    fake_operator.log("mnist-worker-0", "new pod")
    follow.wait_for(lambda it: lines_of(it, "worker-0") == ["old pod", "new pod"], "the new pod's line")
    fake_operator.exit("mnist-worker-0", 0)
    fake_operator.set_condition("mnist", "Succeeded")
    assert lines_of(follow.wait_done(), "worker-0") == ["old pod", "new pod"]


def test_follow_of_a_finished_job_prints_what_exists_and_ends(k8s_backend, fake_operator):
    k8s_backend.submit(manifest(workers=2))
    fake_operator.run_to_success("mnist")
    items = list(k8s_backend.logs("mnist", "default", follow=True))
    assert sorted((item.replica, item.line) for item in items) == [
        ("chief-0", "mnist-chief-0 done"), ("worker-0", "mnist-worker-0 done"), ("worker-1", "mnist-worker-1 done")]


def test_follow_stops_a_replica_still_running_after_the_job_ended(k8s_backend, fake_apiserver, fake_operator):
    k8s_backend.log_drain_seconds = 0.2  # cleanPodPolicy None: ps would run forever (the worker never starts)
    k8s_backend.submit(manifest(workers=1, ps=1))
    fake_operator.create_pods("mnist")
    fake_operator.start("mnist-ps-0")
    fake_operator.start("mnist-chief-0")
    fake_operator.log("mnist-ps-0", "serving")
    follow = Collector(k8s_backend.logs("mnist", "default", follow=True))
    follow.wait_for(lambda it: lines_of(it, "ps-0") == ["serving"], "the ps line")
    fake_operator.exit("mnist-chief-0", 0)
    fake_operator.set_condition("mnist", "Succeeded")
    assert lines_of(follow.wait_done(), "ps-0") == ["serving"]
    wait_for(lambda: fake_apiserver.open_watches == 0, "the follower's watches closed", WAIT)


def test_tail_keeps_the_last_lines_and_with_follow_then_follows(k8s_backend, fake_apiserver, fake_operator):
    """kubectl's logs --tail N [-f]: the kubelet's tailLines on the instances running when
    the command starts; a container that starts later (a restart) is read from its start."""
    k8s_backend.submit(manifest(workers=1, ps=0, chief=0))
    fake_operator.create_pods("mnist")
    fake_operator.start("mnist-worker-0")
    fake_operator.log("mnist-worker-0", "one", "two", "three")
    tail = LogOptions(tail_lines=2)
    assert [item.line for item in k8s_backend.logs("mnist", "default", options=tail)] == ["two", "three"]
    assert list(k8s_backend.logs("mnist", "default", options=LogOptions(tail_lines=0))) == []  # --tail 0: none

    follow = Collector(k8s_backend.logs("mnist", "default", follow=True, options=tail))
    follow.wait_for(lambda it: lines_of(it, "worker-0") == ["two", "three"], "the last two lines")
    fake_operator.log("mnist-worker-0", "four")
    follow.wait_for(lambda it: lines_of(it, "worker-0")[-1:] == ["four"], "a new line")
    fake_operator.crash("mnist-worker-0", 1)
    fake_operator.start("mnist-worker-0")
    fake_operator.log("mnist-worker-0", "again 1", "again 2", "again 3")
    fake_operator.exit("mnist-worker-0", 0)
    fake_operator.set_condition("mnist", "Succeeded")
    assert lines_of(follow.wait_done(), "worker-0") == ["two", "three", "four", "again 1", "again 2", "again 3"]
    asked = [r.query.get("tailLines") for r in fake_apiserver.requests if r.verb == "log"]
    assert asked[:3] == ["2", "0", "2"] and set(asked[3:]) == {None}


def follow_everything(backend, server, operator, replicas: int) -> tuple[list, float]:
    """`logs --replica all -f` through a lifecycle of `replicas`: (log lines, bytes received
    per pod change on the pod watch)."""
    name = f"scale-{replicas}"
    backend.submit(manifest(name=name, workers=replicas - 2))
    backend.api.received.reset()
    lines = Collector(backend.logs(name, "default", follow=True))
    wait_for(lambda: watches_open(server, name), "the watches", WAIT)
    operator.run_to_success(name)
    items = lines.wait_done(timeout=120)
    return items, backend.api.received.watch_bytes_per_change("pod")


def test_following_every_replica_receives_pod_rows_whose_size_does_not_grow_with_the_job(k8s_backend, fake_apiserver,
                                                                                        fake_operator, caplog):
    small_items, small = follow_everything(k8s_backend, fake_apiserver, fake_operator, 12)
    large_items, large = follow_everything(k8s_backend, fake_apiserver, fake_operator, 200)
    assert len(large_items) == 199 and "scale-200-worker-197 done" in lines_of(large_items, "worker-197")
    assert len(small_items) == 11  # chief and workers say "done"; the ps is stopped
    assert large < 400 and large < small + 64  # a row per change, not the pod (TF_CONFIG grows with the job)
    # more streams than the connection pool keeps: their connections are closed without a warning each
    assert not [r for r in caplog.records if "pool is full" in r.getMessage()]


def test_the_logs_of_every_replica_come_in_replica_order_not_the_pod_names(k8s_backend, fake_operator):
    """The API server lists pods by name (worker-10 before worker-2); `logs --replica all`
    prints replica after replica as `status` lists them: chief, ps, then workers by index."""
    k8s_backend.submit(manifest(workers=11))
    fake_operator.run_to_success("mnist")
    replicas = [item.replica for item in k8s_backend.logs("mnist", "default")]
    assert replicas == ["chief-0", *(f"worker-{i}" for i in range(11))]
