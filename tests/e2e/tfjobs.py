"""Reading TFJobs, their pods and services back from the control plane."""
from __future__ import annotations

import re

from tests.support.controlplane import KWOK_DIR, ControlPlane
from tests.support.polling import wait_for

JOB_NAME_LABEL = "training.kubeflow.org/job-name"  # set by training-operator on pods/services
TYPE_LABEL = "training.kubeflow.org/replica-type"
INDEX_LABEL = "training.kubeflow.org/replica-index"
WAIT_S = 120.0
CONDITIONS = ("Created", "Running", "Restarting", "Succeeded", "Failed")


def log_text() -> list[str]:
    """The message part of each CRI line of k8s/kwok/replica.log (what KWOK serves as every
    replica's log)."""
    return [line.split(" ", 3)[3] for line in (KWOK_DIR / "replica.log").read_text().splitlines()]


def tfjob(cp: ControlPlane, namespace: str, name: str) -> dict:
    return cp.kubectl_json("get", "tfjob", name, "-n", namespace)


def owned(cp: ControlPlane, kind: str, namespace: str, name: str) -> list[dict]:
    """Pods or services the operator made for TFJob `name`."""
    return cp.kubectl_json("get", kind, "-n", namespace, "-l", f"{JOB_NAME_LABEL}={name}")["items"]


def true_conditions(job: dict) -> list[str]:
    return [c["type"] for c in job.get("status", {}).get("conditions", []) if c["status"] == "True"]


def replica_key(pod: dict) -> tuple[str, int]:
    labels = pod["metadata"]["labels"]
    return labels[TYPE_LABEL], int(labels[INDEX_LABEL])


def wait_running(cp: ControlPlane, namespace: str, name: str, replicas: int) -> list[dict]:
    """Wait until the TFJob is Running and all `replicas` pods are Running; return the pods."""
    def ready():
        pods = owned(cp, "pods", namespace, name)
        running = [p for p in pods if p.get("status", {}).get("phase") == "Running"]
        if len(running) == replicas and "Running" in true_conditions(tfjob(cp, namespace, name)):
            return running
        return None

    return wait_for(ready, lambda: _state(cp, namespace, name, f"{replicas} Running pods"), WAIT_S)


def wait_pods(cp: ControlPlane, namespace: str, name: str, want, what: str) -> list[dict]:
    """Wait until `want(pods)` is true for the job's pods; return them."""
    def ready():
        pods = owned(cp, "pods", namespace, name)
        return (pods,) if want(pods) else None  # a tuple: an empty list is an answer too

    return wait_for(ready, lambda: _state(cp, namespace, name, what), WAIT_S)[0]


def _state(cp: ControlPlane, namespace: str, name: str, what: str) -> str:
    pods = cp.kubectl("get", "pods", "-n", namespace, "-o", "wide", check=False).stdout
    job = cp.kubectl("get", "tfjob", name, "-n", namespace, "-o", "yaml", check=False)
    return (f"timed out after {WAIT_S:.0f}s waiting for {what} of tfjob {namespace}/{name}\n"
            f"pods:\n{pods}\ntfjob:\n{job.stdout or job.stderr}\n"
            f"training-operator log:\n{cp.log_tail('training-operator')}")


def condition_sequence(output: str, name: str) -> list[str]:
    """TFJob conditions the launcher printed as true, in order, repeats collapsed
    (plain-mode lines `NAME: Running (...)`; a condition turning False is not printed)."""
    pattern = re.compile(rf"^{re.escape(name)}: ({'|'.join(CONDITIONS)})(?![=\w])", re.M)
    seen: list[str] = []
    for match in pattern.finditer(output):
        if not seen or seen[-1] != match[1]:
            seen.append(match[1])
    return seen
