"""`status`, `logs`, `list`, `delete` through FakeBackend."""
from __future__ import annotations

import json

import pytest

from launcher.backends.base import BackendError
from tests.support.fakes.backend import FakeBackend, lifecycle, replica_phase

pytestmark = pytest.mark.usefixtures("cli_env")  # the packaged TFJob CRD, a per-session schema cache

LOGS = {"chief-0": ["chief line"], "ps-0": ["ps line"], "worker-0": ["worker line 1", "worker line 2"]}


def backend(**kwargs) -> FakeBackend:
    return FakeBackend(name="k8s", existing=("mnist",), logs=LOGS, **kwargs)


def test_status_shows_conditions_and_replicas(cli):
    result = cli("status", "mnist", "--backend", "k8s", backend=backend())
    assert result.code == 0
    lines = result.out.splitlines()
    assert lines[0] == "TFJob mnist (namespace default, k8s backend): Succeeded"
    assert "  Created=True TFJobCreated" in lines
    assert "  Succeeded=True TFJobSucceeded: job succeeded" in lines  # the reason, then its message
    assert lines[-4].split() == ["REPLICA", "PHASE", "REASON", "RESTARTS", "NODE", "AGE", "GPU"]
    assert lines[-3].split() == ["chief-0", "Succeeded", "0", "node-1"]


def test_status_of_a_finished_job_with_watch_returns_at_once(cli):
    result = cli("status", "mnist", "-w", "--backend", "k8s", backend=backend(events=lifecycle("Failed")))
    assert result.code == 1


@pytest.mark.parametrize("output", ["json", "yaml", "name"])
def test_status_w_with_a_one_snapshot_output_is_refused_whatever_the_jobs_state(cli, output):
    """It was refused for a running job and taken for an ended one: a script's line passed or failed by timing."""
    for outcome in ("Failed", "Succeeded"):
        cli("status", "mnist", "-w", "-o", output, "--backend", "k8s",
            backend=backend(events=lifecycle(outcome))).refused("--output")


def test_list_all_namespaces_with_a_namespace_is_refused(cli):
    cli("list", "-A", "-n", "team", "--backend", "k8s", backend=backend()).refused("--namespace")


def test_status_of_a_missing_job_exits_1(cli):
    result = cli("status", "nope", "--backend", "k8s", backend=backend())
    assert result.code == 1 and result.out == ""
    assert result.err.startswith("error: tfjob nope not found")


@pytest.mark.parametrize("argv, field", [
    (["status", "Bad_Name"], "NAME"),
    (["logs", "mnist", "--replica", "worker1"], "--replica"),
    (["logs", "mnist", "--replica", "launcher-0"], "--replica"),
    (["delete", "mnist\n"], "NAME"),
    (["list", "-n", "Team A"], "--namespace"),
])
def test_bad_names_are_refused_before_any_call(cli, argv, field):
    fake = backend()
    result = cli(*argv, "--backend", "k8s", backend=fake)
    assert result.code == 2 and result.out == ""
    assert result.err.startswith(f"error: {field}: ")
    assert fake.log_requests == [] and fake.deleted == []


def test_a_cloud_ml_job_id_is_refused_with_the_name_submit_gave_its_job(cli):
    """submit's JOB census_Wide_1 names the TFJob census-wide-1; the other commands say so."""
    for command in ("status", "logs", "delete"):
        fake = backend()
        result = cli(command, "census_Wide_1", "--backend", "k8s", backend=fake)
        assert (result.code, result.out) == (2, "") and fake.log_requests == [] and fake.deleted == []
        assert result.err == ("error: NAME: 'census_Wide_1' is a Cloud ML job id; its TFJob is named census-wide-1 "
                              "(submit turns '_' into '-' and capitals into lower case)\n")


def test_tensorboard_refuses_a_port_out_of_range_in_the_words_serve_uses(cli):
    line = cli("tensorboard", "mnist", "--port", "70000", "--backend", "k8s", backend=backend()).refused("--port")
    assert line == "error: --port: 70000 is not a TCP port; use 1-65535, or 0 for any free port"  # spec.check_listen_port


def test_logs_default_to_the_chief(cli):
    fake = backend()
    result = cli("logs", "mnist", "--backend", "k8s", backend=fake)
    assert result.out == "[chief-0] chief line\n"
    assert fake.log_requests == [("mnist", "chief-0", False)]


def test_logs_default_to_worker_0_without_chief(cli):
    fake = backend(events=lifecycle(replicas=("worker-0", "worker-1")))
    result = cli("logs", "mnist", "--backend", "k8s", backend=fake)
    assert result.out == "[worker-0] worker line 1\n[worker-0] worker line 2\n"


def test_logs_all_replicas_prefixed_and_follow_flag(cli):
    fake = backend()
    result = cli("logs", "mnist", "--replica", "all", "-f", "--backend", "k8s", backend=fake)
    assert result.out.splitlines() == ["[chief-0] chief line", "[ps-0] ps line",
                                       "[worker-0] worker line 1", "[worker-0] worker line 2"]
    assert fake.log_requests == [("mnist", None, True)]


def test_logs_one_replica(cli):
    result = cli("logs", "mnist", "--replica", "ps-0", "--backend", "k8s", backend=backend())
    assert result.out == "[ps-0] ps line\n"


def test_logs_while_replicas_are_unknown_show_all(cli):
    fake = backend(events=[])
    cli("logs", "mnist", "--backend", "k8s", backend=fake)
    assert fake.log_requests == [("mnist", None, False)]


def test_list(cli):
    fake = backend()
    fake.jobs["other"] = {}
    result = cli("list", "-A", "--backend", "k8s", backend=fake)
    assert result.code == 0
    assert [line.split()[:4] for line in result.out.splitlines()] == [
        ["NAME", "NAMESPACE", "PHASE", "REPLICAS"],
        ["mnist", "default", "Running", "worker=2"],
        ["other", "default", "Running", "worker=2"]]


@pytest.mark.parametrize("wait", [False, True])
def test_delete(cli, wait):
    fake = backend()
    result = cli("delete", "mnist", "-n", "team-a", "--backend", "k8s", *(["--wait"] if wait else []), backend=fake)
    assert result.code == 0
    assert result.out == ("tfjob mnist deleted\n" if wait else "tfjob mnist deleted (replicas are being removed)\n")
    assert fake.deleted == [("mnist", "team-a", wait)]


def test_on_off_flags_take_kubectls_true_and_false(cli):
    """pflag's bools take =VALUE (scripts write --ignore-not-found=true, --wait=false): the
    flag or nothing; another value is refused."""
    for flags, wait in ((["--wait=true"], True), (["--wait=false"], False), (["--wait=1", "--ignore-not-found=F"], True)):
        fake = backend()
        assert cli("delete", "mnist", "--backend", "k8s", *flags, backend=fake).code == 0
        assert fake.deleted == [("mnist", "default", wait)], flags
    assert cli("delete", "ghost", "--backend", "k8s", "--ignore-not-found=true", backend=backend()).code == 0
    assert cli("delete", "ghost", "--backend", "k8s", "--ignore-not-found=false", backend=backend()).code == 1
    assert "'maybe'" in cli("delete", "mnist", "--backend", "k8s", "--wait=maybe", backend=backend()).refused("--wait")


def test_delete_missing_exits_1(cli):
    result = cli("delete", "ghost", "--backend", "k8s", backend=backend())
    assert result.code == 1 and "not found" in result.err


def test_several_names_are_deleted_in_turn_as_kubectl_does(cli):
    """`delete a ghost b`: a and b deleted, one error line for ghost, exit 1; with
    --ignore-not-found exit 0 and no line; a bad name anywhere deletes nothing (exit 2)."""
    fake = FakeBackend(name="k8s", existing=("mnist", "other"))
    result = cli("delete", "mnist", "ghost", "other", "--backend", "k8s", "--wait", backend=fake)
    assert result.code == 1 and [d[0] for d in fake.deleted] == ["mnist", "other"]
    assert result.out.splitlines() == ["tfjob mnist deleted", "tfjob other deleted"]
    (line,) = result.err.splitlines()
    assert line.startswith("error: ") and "ghost" in line and "not found" in line
    fake = backend()
    quiet = cli("delete", "ghost", "mnist", "--backend", "k8s", "--ignore-not-found", backend=fake)
    assert (quiet.code, quiet.err) == (0, "") and [d[0] for d in fake.deleted] == ["mnist"]
    class Refusing(FakeBackend):  # the server refuses one of them (a finalizer, RBAC on that one, ...)
        def delete(self, name, namespace, wait=False):
            if name == "mnist":
                raise BackendError("the server refused deleting tfjob mnist (Forbidden)")
            return super().delete(name, namespace, wait)
    fake = Refusing(name="k8s", existing=("mnist", "other"))
    refused = cli("delete", "mnist", "other", "--backend", "k8s", backend=fake)
    assert refused.code == 1 and [d[0] for d in fake.deleted] == ["other"], refused.err
    assert refused.err == "error: the server refused deleting tfjob mnist (Forbidden)\n"
    fake = backend()
    bad = cli("delete", "mnist", "Not_A_Name", "--backend", "k8s", backend=fake)
    assert (bad.code, bad.out) == (2, "") and fake.deleted == [] and "'Not_A_Name'" in bad.err


def test_replica_phase_helper_types():
    assert replica_phase("evaluator-0", "Running").type == "Evaluator"


def test_purge_is_refused_on_a_cluster(cli):
    fake = backend()
    result = cli("delete", "mnist", "--backend", "k8s", "--purge", backend=fake)
    assert (result.code, result.out) == (2, "") and fake.deleted == []
    assert result.err.startswith("error: --purge: only the local backend keeps outputs itself")


def test_status_of_a_failed_job_exits_1_without_watch_too(cli):
    failed = cli("status", "mnist", "--backend", "k8s", backend=backend(events=lifecycle("Failed")))
    assert failed.code == 1 and failed.out.splitlines()[0].endswith("Failed")
    assert cli("status", "mnist", "--backend", "k8s", backend=backend(events=lifecycle("Succeeded"))).code == 0


def test_delete_ignore_not_found(cli):
    result = cli("delete", "ghost", "--backend", "k8s", "--ignore-not-found", backend=backend())
    assert (result.code, result.out, result.err) == (0, "", "")


def test_master_is_gclouds_name_of_the_chief(cli):
    fake = backend()
    result = cli("logs", "mnist", "--backend", "k8s", "--replica", "master-0", backend=fake)
    assert result.code == 0, result.err
    assert fake.log_requests == [("mnist", "chief-0", False)]


def test_gclouds_task_names_are_replicas(cli):
    """gcloud ai-platform jobs stream-logs --task-name and its logs name replicas master-replica-0,
    worker-replica-1, ps-replica-0."""
    fake = backend()
    for task in ("master-replica-0", "worker-replica-0", "ps-replica-0"):
        assert cli("logs", "mnist", "--backend", "k8s", "--replica", task, backend=fake).code == 0, task
    assert [request[1] for request in fake.log_requests] == ["chief-0", "worker-0", "ps-0"]
    assert cli("logs", "mnist", "--backend", "k8s", "--replica", "chief-replica-0", backend=fake).refused("--replica")


def test_help_says_json_and_yaml_are_not_kubectls_objects(capsys):
    """-o json|yaml of status and list are the launcher's own data, not the TFJob objects (and
    v1 List) of kubectl get: the help says so, naming the keys there are."""
    from launcher.backends.base import JobSummary
    from launcher.cli import main

    texts = {}
    for command in ("status", "list"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        texts[command] = " ".join(capsys.readouterr().out.split())
    assert "not the TFJob object of kubectl get tfjob NAME -o yaml" in texts["status"]
    assert "not kubectl's List of TFJob objects" in texts["list"]
    assert "items of " + ", ".join(JobSummary.__dataclass_fields__) in texts["list"]


def test_output_formats_of_status_and_list(cli):
    import json

    import yaml

    as_json = json.loads(cli("status", "mnist", "--backend", "k8s", "-o", "json", backend=backend()).out)
    assert as_json["name"] == "mnist" and as_json["phase"] == "Succeeded"
    assert [c["type"] for c in as_json["conditions"]][-1] == "Succeeded"
    assert {r["replica"] for r in as_json["replicas"]} >= {"chief-0", "worker-0"}
    assert yaml.safe_load(cli("status", "mnist", "--backend", "k8s", "-o", "yaml", backend=backend()).out) == as_json
    assert cli("status", "mnist", "--backend", "k8s", "-o", "name", backend=backend()).out == "tfjob.kubeflow.org/mnist\n"
    assert cli("list", "--backend", "k8s", "-o", "name", backend=backend()).out == "tfjob.kubeflow.org/mnist\n"
    items = json.loads(cli("list", "--backend", "k8s", "-o", "json", backend=backend()).out)["items"]
    assert [item["name"] for item in items] == ["mnist"]
    wide = cli("list", "--backend", "k8s", "-o", "wide", backend=backend()).out.splitlines()
    assert wide[0].split() == ["NAME", "NAMESPACE", "PHASE", "REPLICAS", "AGE", "CREATED", "QUEUE"]
    assert wide[1].split()[-1] == "<none>"  # kubectl's empty cell: the columns stay aligned for awk


def test_since_takes_kubectls_durations_rounded_up_to_whole_seconds(cli):
    fake = FakeBackend(name="k8s", existing=("mnist",), logs={"chief-0": ["c1"]})
    fake.log_options_note = None  # as the k8s backend: the kubelet takes sinceSeconds
    for since in ("1h30m", "2m30s", "1.5s", "300ms", "45"):
        assert cli("logs", "mnist", "--backend", "k8s", "--since", since, backend=fake).code == 0, since
    assert [opts.since_seconds for opts in fake.log_options] == [5400, 150, 2, 1, 45]
    for bad in ("1x", "m5", "0s", "1h-5m"):
        assert "is not a positive duration" in cli("logs", "mnist", "--backend", "k8s", "--since", bad,
                                                    backend=fake).refused("--since"), bad


def test_tail_goes_to_the_backend_with_or_without_follow(cli):
    """Each backend keeps the last lines itself (k8s: the kubelet's tailLines; tested with
    the real backends in tests/integration)."""
    fake = FakeBackend(name="k8s", existing=("mnist",), logs={"chief-0": ["c1"]})
    for follow in ((), ("-f",)):
        result = cli("logs", "mnist", "--backend", "k8s", "--replica", "all", "--tail", "2", *follow, backend=fake)
        assert result.code == 0, result.err
    assert [(req[2], opts.tail_lines) for req, opts in zip(fake.log_requests, fake.log_options)] == \
        [(False, 2), (True, 2)]
    refused = cli("logs", "mnist", "--backend", "k8s", "--tail", "-2", "-f", backend=fake)
    assert (refused.code, refused.err) == (2, "error: --tail: -2 is not a number of lines; use 0 or more "
                                              "(e.g. --tail 20), or -1 for all\n")
    assert len(fake.log_requests) == 2
    every = cli("logs", "mnist", "--backend", "k8s", "--tail", "-1", backend=fake)  # kubectl's: all lines
    assert every.code == 0 and getattr(fake.log_options[-1], "tail_lines", None) is None, every.err
    assert len(fake.log_requests) == 3


def test_previous_with_follow_prints_the_ended_container_and_returns_as_kubectl(cli):
    fake = FakeBackend(name="k8s", existing=("mnist",), logs={"chief-0": ["c1"]})
    fake.log_options_note = None  # as the k8s backend: the kubelet keeps the previous container's log
    result = cli("logs", "mnist", "--backend", "k8s", "-p", "-f", backend=fake)
    assert (result.code, result.out, result.err) == (0, "[chief-0] c1\n", "")
    assert fake.log_requests == [("mnist", "chief-0", False)] and fake.log_options[0].previous


def test_status_and_list_of_a_job_waiting_for_kueue(cli):
    import json

    from launcher.backends.base import JobStatus, JobSummary
    from launcher.events import JobCondition

    class Queued(FakeBackend):
        def status(self, name, namespace):
            return JobStatus(name, namespace, (JobCondition("Created", reason="TFJobCreated"),), backend=self.name,
                             suspended=True, queue="team-a")

        def list(self, namespace):
            return [JobSummary("mnist", "default", "Suspended", replicas={"Worker": 1}, queue="team-a")]

    fake = Queued(name="k8s", existing=("mnist",))
    result = cli("status", "mnist", "--backend", "k8s", backend=fake)
    assert result.code == 0, result.err
    assert result.out.splitlines()[:2] == [
        "TFJob mnist (namespace default, k8s backend): Suspended",
        "  queued in Kueue LocalQueue team-a: no pods until Kueue admits it (kubectl get workloads -n default)"]
    shown = json.loads(cli("status", "mnist", "--backend", "k8s", "-o", "json", backend=fake).out)
    assert (shown["phase"], shown["queue"]) == ("Suspended", "team-a")
    wide = cli("list", "--backend", "k8s", "-o", "wide", backend=fake).out.splitlines()
    assert wide[0].split()[-2:] == ["CREATED", "QUEUE"] and wide[1].split()[-1] == "team-a"


def test_status_wide_adds_each_replicas_exit_code_and_message(cli):
    from launcher.events import JobCondition

    events = [JobCondition("Created"), replica_phase("chief-0", "Running", node="node-1"),
              replica_phase("worker-0", "Failed", restarts=2, node="node-2", exit_code=137, message="OOMKilled"),
              replica_phase("worker-1", "Pending", message="Unschedulable: 0/3 nodes are available")]
    fake = backend(events=events)
    plain = cli("status", "mnist", "--backend", "k8s", backend=fake).out.splitlines()
    assert plain[-4].split() == ["REPLICA", "PHASE", "REASON", "RESTARTS", "NODE", "AGE", "GPU"]
    assert plain[-2].split() == ["worker-0", "Failed", "OOMKilled", "2", "node-2"]  # why, in a word
    assert plain[-1].split() == ["worker-1", "Pending", "Unschedulable", "0"] and "0/3" not in plain[-1]
    wide = cli("status", "mnist", "--backend", "k8s", "-o", "wide", backend=fake)
    assert wide.code == 0, wide.err
    lines = wide.out.splitlines()
    assert lines[-4].split() == ["REPLICA", "PHASE", "REASON", "RESTARTS", "NODE", "AGE", "GPU", "EXIT", "CODE",
                                 "MESSAGE"]
    assert lines[-2].split() == ["worker-0", "Failed", "OOMKilled", "2", "node-2", "137", "OOMKilled"]
    assert lines[-1].split()[:2] == ["worker-1", "Pending"] and \
        lines[-1].endswith("Unschedulable: 0/3 nodes are available")


@pytest.mark.parametrize("flags, line", [
    ((), "No resources found in default namespace.\n"),
    (("-n", "team-a", "-o", "wide"), "No resources found in team-a namespace.\n"),
    (("-A", "-o", "name"), "No resources found\n"),
])
def test_list_without_jobs_says_so_as_kubectl_does(cli, flags, line):
    result = cli("list", "--backend", "k8s", *flags, backend=FakeBackend(name="k8s"))
    assert (result.code, result.out, result.err) == (0, "", line)
    assert json.loads(cli("list", "--backend", "k8s", "-o", "json", backend=FakeBackend(name="k8s")).out) == {"items": []}


def test_status_of_an_ended_job_names_the_replicas_whose_pods_are_gone(cli):
    """cleanPodPolicy Running: the operator deleted the pods still running at the end; status
    says which replicas are not listed and why (stderr), and -o json lists them."""
    from launcher.backends.base import JobStatus
    from launcher.events import JobCondition

    class Cleaned(FakeBackend):
        def status(self, name, namespace):
            return JobStatus(name, namespace, (JobCondition("Succeeded"),),
                             (replica_phase("chief-0", "Succeeded", exit_code=0),), backend=self.name,
                             deleted=("ps-0", "worker-0"), clean_pod_policy="Running")

    fake = Cleaned(name="k8s", existing=("mnist",))
    result = cli("status", "mnist", "--backend", "k8s", backend=fake)
    assert result.code == 0, result.err
    assert result.err == ("note: ps-0, worker-0: not listed: the training-operator deleted their pods when the job "
                          "ended (cleanPodPolicy Running deletes the pods still running then); submit with "
                          "--clean-pod-policy None to keep every pod and its log\n")
    shown = json.loads(cli("status", "mnist", "--backend", "k8s", "-o", "json", backend=fake).out)
    assert shown["deleted"] == ["ps-0", "worker-0"]


def test_status_w_of_a_job_waiting_for_kueue_stays_suspended_until_admitted(cli):
    """The operator's Created comes after the job was created suspended: the followed job is
    still Suspended (waiting for Kueue), not Created."""
    from launcher.backends.base import JobStatus
    from launcher.events import JobCondition

    class Queued(FakeBackend):
        def status(self, name, namespace):
            return JobStatus(name, namespace, (), backend=self.name, suspended=True, queue="team-a")

    fake = Queued(name="k8s", existing=("mnist",), events=[JobCondition("Created", reason="TFJobCreated")])
    result = cli("status", "mnist", "-w", "--backend", "k8s", backend=fake)
    assert result.out.splitlines() == ["mnist: Created (TFJobCreated)", "mnist: Suspended"]
