"""TFJobs of the real trainer image on the real node (tests/node): a training namespace
that enforces Pod Security "restricted" with a PersistentVolumeClaim holding the real MNIST
records and the job dirs, the launcher arguments that use them, and the host side of a
replica (its processes, for a fault that kills one)."""
from __future__ import annotations

import contextlib
import os
import shutil
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import yaml

from tests.support.node import NodeCluster
from tests.support.polling import wait_for
from tests.support.tools import ROOT

NAMESPACE_MANIFEST = ROOT / "k8s" / "namespace.yaml"
MNIST = ROOT / "data" / "mnist"
CLAIM = "shared"
MOUNT = "/mnt/shared"
JOB_NAME_LABEL = "training.kubeflow.org/job-name"
TRAINER_UID = 1000


def restricted_labels() -> list[str]:
    """The Pod Security labels of k8s/namespace.yaml (enforce: restricted)."""
    labels = yaml.safe_load(NAMESPACE_MANIFEST.read_text())["metadata"]["labels"]
    return [f"{k}={v}" for k, v in labels.items() if k.startswith("pod-security.kubernetes.io/")]


@dataclass
class TrainingNamespace:
    cluster: NodeCluster
    name: str
    shared: Path  # the host folder behind the claim: mnist/ (records), runs/<job>/ (job dirs)

    def job_dir(self, job: str) -> Path:
        return self.shared / "runs" / job

    def submit_args(self, job: str, image: str, *launcher: str, trainer: tuple[str, ...] = (),
                    data: str = "mnist") -> list[str]:
        """`launcher submit` of `job` into this namespace, data (the claim's folder `data`)
        and job dir on the claim."""
        return ["submit", "--backend", "k8s", "-n", self.name, "--name", job, "--image", image,
                "--volume", f"{CLAIM}:{MOUNT}", "--job-dir", f"{MOUNT}/runs/{job}", *launcher,
                "--", "--data-dir", f"{MOUNT}/{data}", *trainer]

    def pods(self, job: str) -> list[dict]:
        return self.cluster.kubectl_json("get", "pods", "-n", self.name, "-l", f"{JOB_NAME_LABEL}={job}")["items"]

    def pod(self, name: str) -> dict:
        return self.cluster.kubectl_json("get", "pod", name, "-n", self.name)

    def tfjob_conditions(self, job: str) -> list[str]:
        status = self.cluster.kubectl_json("get", "tfjob", job, "-n", self.name).get("status", {})
        return [c["type"] for c in status.get("conditions", []) if c.get("status") == "True"]


@contextlib.contextmanager
def training_namespace(cluster: NodeCluster, prefix: str) -> Iterator[TrainingNamespace]:
    """A fresh namespace enforcing "restricted" with claim `shared`: a hostPath volume of
    the node holding a copy of the real MNIST records and a runs/ folder uid 1000 writes."""
    with cluster.cp.namespace(prefix, wait=False) as name:  # pods that still run take 30 s to go
        cluster.kubectl("label", "namespace", name, "--overwrite", *restricted_labels())
        shared = cluster.root / "volumes" / name
        shutil.copytree(MNIST, shared / "mnist")
        (shared / "runs").mkdir()
        os.chmod(shared / "runs", 0o777)
        with cluster.host_volume(name, CLAIM, shared):
            yield TrainingNamespace(cluster, name, shared)


def container_pids(pod: dict, program: bytes = b"trainer.task") -> list[int]:
    """Host PIDs of the pod's processes running `program` (their cgroup names the pod uid)."""
    uid = pod["metadata"]["uid"]
    marks = (f"pod{uid}", f"pod{uid.replace('-', '_')}")
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cgroup = (entry / "cgroup").read_text()
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(mark in cgroup for mark in marks) and program in b" ".join(cmdline):
            found.append(int(entry.name))
    return found


def process_uid(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Uid:"):
            return int(line.split()[1])
    raise LookupError(pid)


def kill_trainer(pod: dict, timeout: float = 60.0) -> int:
    """SIGKILL the trainer process of a running replica, as an OOM kill would; its pid."""
    pids = wait_for(lambda: container_pids(pod), lambda: f"no trainer process of {pod['metadata']['name']}", timeout)
    os.kill(pids[0], signal.SIGKILL)
    return pids[0]


def restarts(pod: dict) -> int:
    return sum(int(c.get("restartCount") or 0) for c in pod.get("status", {}).get("containerStatuses") or [])
