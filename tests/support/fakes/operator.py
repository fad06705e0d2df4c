"""FAKE training-operator v1.9 and kubelet for tests, writing into a FakeApiServer.

Writes what the real ones write, step by step under the test's control: the pods of a
TFJob (name `<job>-<type>-<i>`, the operator's labels with the lower-case replica type,
controller owner reference, TF_CONFIG from `launcher.tfconfig`), scheduling, container
instances with IDs, exits and in-place restarts (CrashLoopBackOff), log lines, and TFJob
conditions with the operator's setCondition rules (`local_runs.set_condition`: Running
and Restarting replace each other, Succeeded/Failed turn Running to False).
"""
from __future__ import annotations

import copy
import uuid

from launcher.backends.local.runs import now, set_condition
from launcher.spec import replica_name
from launcher.tfconfig import replicas, tf_config

from ..apiserver import FakeApiServer

OPERATOR_NAME = "tfjob-controller"
LABELS = ("training.kubeflow.org/job-name", "training.kubeflow.org/replica-type",
          "training.kubeflow.org/replica-index")
_REASONS = {"Created": "TFJobCreated", "Running": "TFJobRunning", "Restarting": "TFJobRestarting",
            "Succeeded": "TFJobSucceeded", "Failed": "TFJobFailed"}


class FakeOperator:
    def __init__(self, server: FakeApiServer, namespace: str = "default"):
        self.server = server
        self.namespace = namespace

    # ---- pods ---------------------------------------------------------------------
    def create_pods(self, job: str) -> list[str]:
        """One Pending pod per replica, then the Created condition (operator order)."""
        tfjob = self.server.get("tfjobs", self.namespace, job)
        names = [self.create_pod(tfjob, rtype, index) for rtype, index in replicas(tfjob)]
        self.set_condition(job, "Created")
        return names

    def create_pod(self, tfjob: dict, rtype: str, index: int) -> str:
        spec = tfjob["spec"]["tfReplicaSpecs"][rtype]
        template = copy.deepcopy(spec["template"])
        name = replica_name(tfjob["metadata"]["name"], rtype, index)
        labels = {**template.get("metadata", {}).get("labels", {}),
                  "training.kubeflow.org/operator-name": OPERATOR_NAME,
                  LABELS[0]: tfjob["metadata"]["name"], LABELS[1]: rtype.lower(), LABELS[2]: str(index)}
        if rtype == "Chief":
            labels["training.kubeflow.org/job-role"] = "master"
        pod_spec = template["spec"]
        policy = spec.get("restartPolicy", "Never")
        pod_spec["restartPolicy"] = "Never" if policy == "ExitCode" else policy
        config = tf_config(tfjob, rtype, index)
        for container in pod_spec["containers"]:
            if container["name"] == "tensorflow" and config:
                container["env"] = [*container.get("env", []), {"name": "TF_CONFIG", "value": config}]
        meta = tfjob["metadata"]
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": name, "namespace": self.namespace, "labels": labels,
                            "ownerReferences": [{"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "name": meta["name"],
                                                 "uid": meta["uid"], "controller": True,
                                                 "blockOwnerDeletion": True}]},
               "spec": pod_spec, "status": {"phase": "Pending"}}
        self.server.create("pods", pod)
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

    def delete_pod(self, pod: str) -> None:
        self.server.remove("pods", self.namespace, pod)

    def container_id(self, pod: str) -> str:
        return self._container(self.server.get("pods", self.namespace, pod))["containerID"]

    # ---- TFJob status -------------------------------------------------------------
    def set_condition(self, job: str, kind: str, message: str = "") -> None:
        """A True condition by the operator's setCondition rules (shared with the local
        backend), with the Kubernetes field names."""
        def change(obj):
            status = obj.setdefault("status", {})
            updated = set_condition(status.get("conditions", []), kind, _REASONS[kind],
                                    message or f"TFJob {self.namespace}/{job} is {kind.lower()}.")
            status["conditions"] = [_k8s_condition(c) for c in updated]
        self.server.update("tfjobs", self.namespace, job, change)

    def set_active(self, job: str, rtype: str, active: int) -> None:
        """A status update that changes no condition (replicaStatuses)."""
        def change(obj):
            replica_statuses = obj.setdefault("status", {}).setdefault("replicaStatuses", {})
            replica_statuses[rtype] = {"active": active}
        self.server.update("tfjobs", self.namespace, job, change)

    # ---- a whole lifecycle (bench) ------------------------------------------------------
    def run_to_success(self, job: str) -> None:
        """Created -> every replica Running -> Running -> workers and chief exit 0 ->
        Succeeded -> remaining (ps) pods deleted (cleanPodPolicy Running)."""
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



def _k8s_condition(condition: dict) -> dict:
    """The local backend's {"time": ...} as lastTransitionTime and lastUpdateTime."""
    if "time" not in condition:
        return condition
    rest = {k: v for k, v in condition.items() if k != "time"}
    return {**rest, "lastUpdateTime": condition["time"], "lastTransitionTime": condition["time"]}
