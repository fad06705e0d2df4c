"""The acceptance job on a real node: `launcher submit --workers 2 --ps 1` of the real
trainer image trains in 4 real pods (chief, ps, 2 workers) with the TF_CONFIG the operator
wrote, its cluster DNS names resolved by CoreDNS through the headless services; the
launcher exits 0 when the TFJob is Succeeded; the exported SavedModel classifies the real
MNIST test set at >= 97%; `launcher logs --replica all -f` and `kubectl logs` show the
containers' own output; the pods run as uid 1000 under Pod Security "restricted"."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from tests.support.launcher_process import launcher_process, run_launcher
from tests.support.node.jobs import TRAINER_UID, container_pids, process_uid, training_namespace
from tests.support.polling import wait_for
from tests.support.saved_model import export_accuracy

JOB = "mnist-ps"
STEPS = 300
REPLICAS = ("chief-0", "ps-0", "worker-0", "worker-1")
RUN_TIMEOUT_S = 900.0
TRAINER_ARGS = ("--train-steps", str(STEPS), "--log-every-steps", "50", "--eval-every-steps", "0")


@dataclass
class Run:
    namespace: str
    job_dir: Path
    data_dir: Path
    exit_code: int
    output: str
    follow_output: str
    follow_exit: int
    running_pods: list[dict]
    trainer_uids: set[int]
    kubectl_chief_log: str
    conditions: list[str]
    pods_left: list[str]  # the replicas whose pods are left once no pod runs (cleanPodPolicy Running)
    ended_logs: object  # `logs --replica all` then
    ended_status: object  # `status` then


@pytest.fixture(scope="module")
def run(node_cluster, trainer_image) -> Iterator[Run]:
    with training_namespace(node_cluster, "node-ps") as ns:
        args = ns.submit_args(JOB, trainer_image, "--workers", "2", "--ps", "1", trainer=TRAINER_ARGS)
        with launcher_process(node_cluster, *args) as submit:
            pods = wait_for(lambda: _all_running(ns), lambda: f"4 pods not Running:\n{submit.output}",
                            RUN_TIMEOUT_S / 3)
            uids = wait_for(lambda: _trainer_uids(pods), lambda: "no trainer processes found", 120)
            with launcher_process(node_cluster, "logs", JOB, "--backend", "k8s", "-n", ns.name,
                                  "--replica", "all", "-f") as follow:
                exit_code = submit.wait(RUN_TIMEOUT_S)
                follow_exit = follow.wait(120)
        chief_log = node_cluster.kubectl("logs", f"{JOB}-chief-0", "-n", ns.name).stdout
        left = wait_for(lambda: _settled(ns), lambda: f"pods still running or terminating: {ns.pods(JOB)}", 120)
        ended = run_launcher(node_cluster, "logs", JOB, "--backend", "k8s", "-n", ns.name, "--replica", "all")
        status = run_launcher(node_cluster, "status", JOB, "--backend", "k8s", "-n", ns.name)
        yield Run(ns.name, ns.job_dir(JOB), ns.shared / "mnist", exit_code, submit.output, follow.output,
                  follow_exit, pods, uids, chief_log, ns.tfjob_conditions(JOB), left[0], ended, status)


def _all_running(ns) -> list[dict] | None:
    pods = ns.pods(JOB)
    running = [p for p in pods if p.get("status", {}).get("phase") == "Running"]
    return running if len(running) == len(REPLICAS) else None


def _settled(ns) -> tuple[list[str]] | None:
    """Once no pod of the job runs or terminates: the replicas whose pods are left. The
    operator deletes the pods still running when the job ends (cleanPodPolicy Running); a
    ps or worker that saw the done marker first has exited 0 by itself, and its pod stays."""
    pods = ns.pods(JOB)
    if any(p.get("status", {}).get("phase") not in ("Succeeded", "Failed") or p["metadata"].get("deletionTimestamp")
           for p in pods):
        return None
    return ([p["metadata"]["name"].removeprefix(f"{JOB}-") for p in pods],)


def _trainer_uids(pods: list[dict]) -> set[int] | None:
    pids = [pid for pod in pods for pid in container_pids(pod)]
    return {process_uid(pid) for pid in pids} if len(pids) >= len(pods) else None


def test_launcher_exits_0_when_the_tfjob_succeeded(run):
    assert run.exit_code == 0, run.output
    assert "Succeeded" in run.conditions
    assert f"{JOB}: Succeeded" in run.output


def test_four_real_pods_with_the_operators_tf_config(run):
    assert sorted(p["metadata"]["name"].removeprefix(f"{JOB}-") for p in run.running_pods) == list(REPLICAS)
    for pod in run.running_pods:
        assert pod["spec"]["nodeName"] == "tfjob-node"
        env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0].get("env", [])}
        cluster = json.loads(env["TF_CONFIG"])["cluster"]
        assert cluster["worker"] == [f"{JOB}-worker-{i}.{run.namespace}.svc:2222" for i in range(2)]
        assert cluster["ps"] == [f"{JOB}-ps-0.{run.namespace}.svc:2222"]


def test_exported_model_classifies_real_mnist(run):
    exports = sorted((run.job_dir / "export").iterdir())
    assert exports, f"no export in {run.job_dir}"
    examples, accuracy = export_accuracy(exports[-1], run.data_dir)
    assert examples == 10_000
    assert accuracy >= 0.97


def test_trained_the_requested_steps(run):
    assert f"Final metrics after {STEPS} steps" in run.kubectl_chief_log, run.kubectl_chief_log[-3000:]


def test_logs_follow_shows_every_replicas_real_output(run):
    assert run.follow_exit == 0, run.follow_output
    for replica in ("chief-0", "worker-0", "worker-1", "ps-0"):
        assert any(line.startswith(f"[{replica}] ") for line in run.follow_output.splitlines()), replica
    assert any(line.startswith("[chief-0] ") and "Train [" in line for line in run.follow_output.splitlines())


def test_logs_and_status_after_the_end_name_the_replicas_whose_pods_were_deleted(run):
    """cleanPodPolicy Running: the operator deleted the ps and workers still running at the
    end, and their logs with them (one that had exited by itself keeps its pod and log).
    `logs --replica all` shows the logs that are left and `status` their rows, and each says
    in one note which replicas went and why."""
    gone = [replica for replica in REPLICAS if replica not in run.pods_left]
    assert "chief-0" in run.pods_left and len(run.pods_left) + len(gone) == len(REPLICAS)
    why = ("the training-operator deleted their pods when the job ended (cleanPodPolicy Running deletes the pods "
           "still running then); submit with --clean-pod-policy None to keep every pod and its log")
    assert run.ended_logs.returncode == 0, run.ended_logs.stderr
    lines = run.ended_logs.stdout.splitlines()
    assert [line for line in lines if line.startswith("[chief-0] ")] == [
        f"[chief-0] {line}" for line in run.kubectl_chief_log.splitlines()]
    assert {line.split("]")[0][1:] for line in lines} == set(run.pods_left)
    assert run.ended_logs.stderr.splitlines() == ([f"note: {', '.join(gone)}: no log: {why}"] if gone else [])
    assert run.ended_status.returncode == 0, run.ended_status.stderr
    rows = run.ended_status.stdout.splitlines()
    header = next(index for index, row in enumerate(rows) if row.startswith("REPLICA"))
    listed = [row.split()[0] for row in rows[header + 1:]]
    assert listed == [replica for replica in REPLICAS if replica in run.pods_left]
    assert run.ended_status.stderr.splitlines() == ([f"note: {', '.join(gone)}: not listed: {why}"] if gone else [])


def test_kubectl_logs_shows_the_chiefs_output(run):
    assert "Train [" in run.kubectl_chief_log and "Exported model to" in run.kubectl_chief_log


def test_pods_run_as_uid_1000_under_restricted(run):
    assert run.trainer_uids == {TRAINER_UID}
    owners = {path.stat().st_uid for path in run.job_dir.rglob("*")}
    assert owners == {TRAINER_UID}
