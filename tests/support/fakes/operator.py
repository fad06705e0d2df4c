"""FAKE training-operator v1.9.4 and kubelet for tests, writing into a FakeApiServer.

Writes what the real ones write, step by step under the test's control: the pods and
headless services of a TFJob, scheduling, container instances with IDs, exits and in-place
restarts (CrashLoopBackOff), log lines, and TFJob conditions. It is a test double of the
operator, so it never calls the launcher: names, labels, owner references, TF_CONFIG and
the condition rules are written here from training-operator v1.9.4's Go source (module
github.com/kubeflow/training-operator@v1.9.4; each function cites its file). The contract
test tests/e2e/test_operator_contract.py runs the same job through this fake and through
the real operator and compares what they write.
"""
from __future__ import annotations

import copy
import json
import os
import uuid
from typing import Callable

from ..apiserver import FakeApiServer
from ..apiserver.rules import now

# pkg/apis/kubeflow.org/v1/common_types.go
OPERATOR_NAME_LABEL = "training.kubeflow.org/operator-name"
JOB_NAME_LABEL = "training.kubeflow.org/job-name"
REPLICA_TYPE_LABEL = "training.kubeflow.org/replica-type"
REPLICA_INDEX_LABEL = "training.kubeflow.org/replica-index"
JOB_ROLE_LABEL = "training.kubeflow.org/job-role"
LABELS = (JOB_NAME_LABEL, REPLICA_TYPE_LABEL, REPLICA_INDEX_LABEL)
# pkg/controller.v1/tensorflow/tfjob_controller.go (controllerName)
OPERATOR_NAME = "tfjob-controller"
# pkg/apis/kubeflow.org/v1/tensorflow_types.go
DEFAULT_CONTAINER = "tensorflow"
DEFAULT_PORT_NAME = "tfjob-port"
DEFAULT_PORT = 2222
DEFAULT_RESTART_POLICY = "Never"
# pkg/controller.v1/tensorflow/tensorflow.go (EnvCustomClusterDomain)
CLUSTER_DOMAIN_ENV = "CUSTOM_CLUSTER_DOMAIN"
# pkg/controller.v1/tensorflow/util.go isDistributed / UpdateJobStatus: the replica types it knows
_ALL_TYPES = ("Chief", "Evaluator", "Master", "PS", "Worker")
# pkg/util/status.go: reason = kind + JobXxxReason (NewReason)
_REASONS = {kind: f"TFJob{kind}" for kind in ("Created", "Running", "Restarting", "Succeeded", "Failed")}


# ---- the operator's rules, from its source ------------------------------------------------
def general_name(job: str, rtype: str, index: int | str) -> str:
    """pkg/controller.v1/common/util.go GenGeneralName: pod and service name."""
    return f"{job}-{rtype.lower()}-{index}".replace("/", "-")


def replica_count(spec: dict) -> int:
    """pkg/apis/kubeflow.org/v1/common_defaults.go setDefaultReplicas: 1 when unset."""
    replicas = spec.get("replicas")
    return 1 if replicas is None else int(replicas)


def job_labels(job: str) -> dict[str, str]:
    """pkg/controller.v1/common/job_controller.go GenLabels."""
    return {OPERATOR_NAME_LABEL: OPERATOR_NAME, JOB_NAME_LABEL: job.replace("/", "-")}


def is_master_role(specs: dict, rtype: str, index: int) -> bool:
    """pkg/controller.v1/tensorflow/tfjob_controller.go IsMasterRole."""
    if "Chief" in specs or "Master" in specs:
        return rtype in ("Chief", "Master")
    return rtype == "Worker" and index == 0


def tf_port(spec: dict) -> int:
    """pkg/controller.v1/tensorflow/util.go GetPortFromTFJob."""
    for container in spec["template"]["spec"]["containers"]:
        if container["name"] == DEFAULT_CONTAINER:
            for port in container.get("ports") or []:
                if port.get("name") == DEFAULT_PORT_NAME:
                    return int(port["containerPort"])
    return DEFAULT_PORT


def service_ports(spec: dict) -> list[dict]:
    """pkg/core/service.go GetPortsFromJob, after the TFJob defaulting
    (pkg/apis/kubeflow.org/v1/tensorflow_defaults.go setTensorflowDefaultPort adds
    tfjob-port 2222 to the tensorflow container when it has no port of that name)."""
    for container in spec["template"]["spec"]["containers"]:
        if container["name"] == DEFAULT_CONTAINER:
            ports = {p.get("name", ""): int(p["containerPort"]) for p in container.get("ports") or []}
            ports.setdefault(DEFAULT_PORT_NAME, DEFAULT_PORT)
            return [{"name": name, "port": port} for name, port in ports.items()]
    return []


def is_distributed(specs: dict) -> bool:
    """pkg/controller.v1/tensorflow/util.go isDistributed: more than one replica in all."""
    return sum(replica_count(specs[t]) for t in _ALL_TYPES if specs.get(t) is not None) != 1


def cluster_spec(tfjob: dict) -> dict[str, list[str]]:
    """pkg/controller.v1/tensorflow/tensorflow.go genClusterSpec: every replica type, lower
    case, each replica's headless service `<name>.<namespace>.svc[.<domain>]:<port>`."""
    meta, cluster = tfjob["metadata"], {}
    domain = os.environ.get(CLUSTER_DOMAIN_ENV, "")
    for rtype, spec in tfjob["spec"]["tfReplicaSpecs"].items():
        port = tf_port(spec)
        cluster[rtype.lower()] = [
            f"{general_name(meta['name'], rtype, i)}.{meta['namespace']}.svc" + (f".{domain}" if domain else "")
            + f":{port}" for i in range(replica_count(spec))]
    return cluster


def go_json(value) -> str:
    """encoding/json.Marshal: compact, map keys sorted, <>& escaped."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def tf_config_env(tfjob: dict, rtype: str, index: int) -> str | None:
    """pkg/controller.v1/tensorflow/tfjob_controller.go SetClusterSpec and tensorflow.go
    genTFConfigJSONStr: no TF_CONFIG for a one-replica job; the sparse form with
    enableDynamicWorker; else cluster, task and environment "cloud" (TFConfig's field order)."""
    specs = tfjob["spec"]["tfReplicaSpecs"]
    if not is_distributed(specs):
        return None
    cluster, rt = cluster_spec(tfjob), rtype.lower()
    task = {"type": rt, "index": index}
    if tfjob["spec"].get("enableDynamicWorker"):
        sparse = {"worker": {}, "ps": []}  # convertClusterSpecToSparseClusterSpec
        if rt == "ps":
            sparse["ps"] = [cluster[rt][index]]
        elif rt == "worker":
            sparse["ps"] = cluster.get("ps") or []
            sparse["worker"] = {str(index): cluster[rt][index]}
        return go_json({"cluster": sparse, "task": task})
    return go_json({"cluster": dict(sorted(cluster.items())), "task": task, "environment": "cloud"})


def owner_reference(tfjob: dict) -> dict:
    """pkg/controller.v1/common/job_controller.go GenOwnerReference."""
    meta = tfjob["metadata"]
    return {"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "name": meta["name"], "uid": meta["uid"],
            "controller": True, "blockOwnerDeletion": True}


def pod_restart_policy(spec: dict) -> str:
    """pkg/core/pod.go SetRestartPolicy (ExitCode is Never in the pod), after the
    defaulting (tensorflow_defaults.go: Never when unset)."""
    policy = spec.get("restartPolicy") or DEFAULT_RESTART_POLICY
    return "Never" if policy == "ExitCode" else policy


def update_job_conditions(conditions: list[dict], kind: str, reason: str, message: str) -> list[dict]:
    """pkg/util/status.go UpdateJobConditions -> setCondition / filterOutCondition, with
    status True: nothing changes once Failed or when type, status and reason are the same;
    Running and Restarting replace each other; Succeeded and Failed turn Running False;
    the new condition goes last, keeping lastTransitionTime when the status is unchanged."""
    if any(c["type"] == "Failed" and c["status"] == "True" for c in conditions):
        return conditions
    current = next((c for c in conditions if c["type"] == kind), None)
    if current and current["status"] == "True" and current.get("reason") == reason:
        return conditions
    stamp = now()
    condition = {"type": kind, "status": "True", "reason": reason, "message": message,
                 "lastUpdateTime": stamp,
                 "lastTransitionTime": current["lastTransitionTime"] if current and current["status"] == "True"
                 else stamp}
    kept = []
    for c in conditions:
        if c["type"] == kind or {c["type"], kind} == {"Running", "Restarting"}:
            continue
        if kind in ("Failed", "Succeeded") and c["type"] == "Running":
            c = {**c, "status": "False"}
        kept.append(c)
    return [*kept, condition]


def condition_message(kind: str, namespace: str, job: str) -> str:
    """The messages of tfjob_controller.go (onOwnerCreateFunc, UpdateJobStatus) and
    common/pod.go (Restarting)."""
    return {"Created": f"TFJob {job} is created.",
            "Running": f"TFJob {namespace}/{job} is running.",
            "Succeeded": f"TFJob {namespace}/{job} successfully completed.",
            "Restarting": f"job {job} is restarting because Worker replica(s) failed.",
            "Failed": f"TFJob {namespace}/{job} has failed because 1 Worker replica(s) failed."}[kind]


class FakeOperator:
    def __init__(self, server: FakeApiServer, namespace: str = "default"):
        self.server = server
        self.namespace = namespace

    # ---- pods and services ------------------------------------------------------------
    def create_pods(self, job: str) -> list[str]:
        """One Pending pod and one headless service per replica, then the Created
        condition (the order the real operator's first reconcile writes them)."""
        tfjob = self.server.get("tfjobs", self.namespace, job)
        names = []
        for rtype, spec in sorted(tfjob["spec"]["tfReplicaSpecs"].items()):
            for index in range(replica_count(spec)):
                names.append(self.create_pod(tfjob, rtype, index))
                self.create_service(tfjob, rtype, index)
        self.set_condition(job, "Created")
        return names

    def create_pod(self, tfjob: dict, rtype: str, index: int) -> str:
        """pkg/controller.v1/common/pod.go createNewPod."""
        specs = tfjob["spec"]["tfReplicaSpecs"]
        spec, meta = specs[rtype], tfjob["metadata"]
        template = copy.deepcopy(spec["template"])
        labels = {**job_labels(meta["name"]), REPLICA_TYPE_LABEL: rtype.lower(), REPLICA_INDEX_LABEL: str(index)}
        if is_master_role(specs, rtype, index):
            labels[JOB_ROLE_LABEL] = "master"
        name = general_name(meta["name"], rtype, index)
        pod_meta = {**template.get("metadata", {}), "name": name, "namespace": self.namespace,
                    "labels": {**(template.get("metadata", {}).get("labels") or {}), **labels},
                    "ownerReferences": [owner_reference(tfjob)]}
        pod_spec = template["spec"]
        config = tf_config_env(tfjob, rtype, index)
        for container in pod_spec["containers"]:
            if container["name"] == DEFAULT_CONTAINER and config:
                container["env"] = [*(container.get("env") or []), {"name": "TF_CONFIG", "value": config}]
                break
        pod_spec["restartPolicy"] = pod_restart_policy(spec)
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": pod_spec,
               "status": {"phase": "Pending"}}
        self.server.create("pods", pod)
        return name

    def create_service(self, tfjob: dict, rtype: str, index: int) -> str:
        """pkg/controller.v1/common/service.go CreateNewService: headless, selecting the
        replica's pod by the operator's labels (no job-role)."""
        meta = tfjob["metadata"]
        labels = {**job_labels(meta["name"]), REPLICA_TYPE_LABEL: rtype.lower(), REPLICA_INDEX_LABEL: str(index)}
        name = general_name(meta["name"], rtype, index)
        self.server.create("services", {
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "namespace": self.namespace, "labels": labels,
                         "ownerReferences": [owner_reference(tfjob)]},
            "spec": {"clusterIP": "None", "selector": dict(labels),
                     "ports": service_ports(tfjob["spec"]["tfReplicaSpecs"][rtype])}})
        return name

    def schedule(self, pod: str, node: str = "node-1") -> None:
        def change(obj):
            obj["spec"]["nodeName"] = node
            obj["status"] = {"phase": "Pending", "startTime": now(),
                             "conditions": [{"type": "PodScheduled", "status": "True"}],
                             "containerStatuses": [self._status(obj, c["name"], {"waiting": {"reason": "ContainerCreating"}})
                                                   for c in obj["spec"]["containers"]]}
        self._update(pod, change)

    def unschedulable(self, pod: str, message: str) -> None:
        def change(obj):
            obj["status"]["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                            "message": message}]
        self._update(pod, change)
        self.server.create("events", {  # what the scheduler records beside the condition
            "apiVersion": "v1", "kind": "Event", "metadata": {"name": f"{pod}.{uuid.uuid4().hex[:16]}",
                                                              "namespace": self.namespace},
            "involvedObject": {"kind": "Pod", "namespace": self.namespace, "name": pod,
                               "uid": self.server.get("pods", self.namespace, pod)["metadata"]["uid"]},
            "reason": "FailedScheduling", "type": "Warning", "message": message, "lastTimestamp": now(),
            "source": {"component": "default-scheduler"}})

    def start(self, pod: str, node: str = "node-1") -> str:
        """Start a new instance of the tensorflow container (scheduling first if needed);
        returns its container ID."""
        if not self.server.get("pods", self.namespace, pod)["spec"].get("nodeName"):
            self.schedule(pod, node)
        container_id = f"containerd://{uuid.uuid4().hex}"
        self.server.append_log(container_id)

        def change(obj):
            status = self._container(obj)
            status.update(containerID=container_id, ready=True, started=True, state={"running": {"startedAt": now()}})
            obj["status"]["phase"] = "Running"
        self._update(pod, change)
        return container_id

    def log(self, pod: str, *lines: str) -> None:
        self.server.append_log(self.container_id(pod), *lines)

    def exit(self, pod: str, code: int = 0) -> None:
        """The container ends and the pod with it (restartPolicy Never / ExitCode)."""
        container_id = self.container_id(pod)

        def change(obj):
            status = self._container(obj)
            status.update(ready=False, started=False, state={"terminated": self._terminated(status, code)})
            obj["status"]["phase"] = "Succeeded" if code == 0 else "Failed"
        self._update(pod, change)
        self.server.end_log(container_id)

    def crash(self, pod: str, code: int = 1) -> None:
        """restartPolicy OnFailure: the container exits and waits to be restarted."""
        container_id = self.container_id(pod)

        def change(obj):
            status = self._container(obj)
            status.update(ready=False, started=False, restartCount=status["restartCount"] + 1,
                          lastState={"terminated": self._terminated(status, code)},
                          state={"waiting": {"reason": "CrashLoopBackOff",
                                             "message": "back-off 10s restarting failed container"}})
        self._update(pod, change)
        self.server.end_log(container_id)

    def exit_in_back_off(self, pod: str, code: int = 1) -> None:
        """restartPolicy OnFailure, a container that was restarted exits again: kubelet
        v1.36.3 removes the container before it at once (kubelet.go cleanUpContainersInPod
        keeps one exited container per container) and, until the back-off ends, its status
        says this one terminated with the removed one as the last state; a log asked of
        that one is then lost on every answer (tests/node measured it)."""
        container_id = self.container_id(pod)
        removed = self._container(self.server.get("pods", self.namespace, pod))["lastState"]["terminated"]["containerID"]

        def change(obj):
            status = self._container(obj)
            status.update(ready=False, started=False, state={"terminated": self._terminated(status, code)})
        self._update(pod, change)
        self.server.end_log(container_id)
        self.server.remove_container(removed)

    def delete_pod(self, pod: str) -> None:
        self.server.remove("pods", self.namespace, pod)

    def container_id(self, pod: str) -> str:
        return self._container(self.server.get("pods", self.namespace, pod))["containerID"]

    # ---- TFJob status -------------------------------------------------------------
    def set_condition(self, job: str, kind: str, message: str = "") -> None:
        """A True condition by the operator's rules (update_job_conditions)."""
        def change(obj):
            status = obj.setdefault("status", {})
            status["conditions"] = update_job_conditions(
                status.get("conditions") or [], kind, _REASONS[kind],
                message or condition_message(kind, self.namespace, job))
        self.server.update("tfjobs", self.namespace, job, change)

    def set_active(self, job: str, rtype: str, active: int) -> None:
        """A status update that changes no condition (replicaStatuses)."""
        def change(obj):
            replica_statuses = obj.setdefault("status", {}).setdefault("replicaStatuses", {})
            replica_statuses[rtype] = {"active": active}
        self.server.update("tfjobs", self.namespace, job, change)

    # ---- a whole lifecycle (bench) ------------------------------------------------------
    def run_to_success(self, job: str, before_success: Callable[[], None] | None = None) -> None:
        """Created -> every replica Running -> Running -> workers and chief exit 0 ->
        Succeeded -> remaining (ps) pods deleted (cleanPodPolicy Running). `before_success`
        runs just before the Succeeded condition is set."""
        pods = self.create_pods(job)
        for pod in pods:
            self.schedule(pod)
        for pod in pods:
            self.start(pod)
        self.set_condition(job, "Running")
        finishing = [p for p in pods if "-ps-" not in p]
        for pod in finishing:
            self.log(pod, f"{pod} done")
            self.exit(pod, 0)
        if before_success is not None:
            before_success()
        self.set_condition(job, "Succeeded")
        for pod in pods:
            if pod not in finishing:
                self.delete_pod(pod)

    # ---- helpers ------------------------------------------------------------------
    def _update(self, pod: str, change) -> None:
        self.server.update("pods", self.namespace, pod, change)

    @staticmethod
    def _status(pod: dict, name: str, state: dict) -> dict:
        image = next(c.get("image", "") for c in pod["spec"]["containers"] if c["name"] == name)
        return {"name": name, "image": image, "ready": False, "restartCount": 0, "started": False, "state": state}

    @staticmethod
    def _container(pod: dict) -> dict:
        return next(s for s in pod["status"]["containerStatuses"] if s["name"] == "tensorflow")

    @staticmethod
    def _terminated(status: dict, code: int) -> dict:
        return {"exitCode": code, "reason": "Completed" if code == 0 else "Error",
                "containerID": status["containerID"], "startedAt": status["state"]["running"]["startedAt"],
                "finishedAt": now()}
