"""Pod Security Admission "restricted", enforced by the real kube-apiserver in a namespace
labelled as k8s/namespace.yaml labels `training`: a pod without a seccomp profile is
refused there (the check can fail), and the operator's pods of a launcher-rendered TFJob
are admitted and run to success."""
from __future__ import annotations

import json

import yaml

from tests.support.launcher_process import launcher_process
from tests.e2e.tfjobs import wait_running
from tests.support.tools import ROOT

JOB = "restricted"
FINISH_TIMEOUT_S = 120.0
NAMESPACE_MANIFEST = ROOT / "k8s" / "namespace.yaml"


def pod_security_labels() -> list[str]:
    labels = yaml.safe_load(NAMESPACE_MANIFEST.read_text())["metadata"]["labels"]
    return [f"{key}={value}" for key, value in labels.items() if key.startswith("pod-security.kubernetes.io/")]


def unconfined_pod(tmp_path) -> str:
    """A pod that is restricted in all but the seccomp profile."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "no-seccomp"},
           "spec": {"securityContext": {"runAsNonRoot": True, "runAsUser": 1000},
                    "containers": [{"name": "c", "image": "busybox",
                                    "securityContext": {"allowPrivilegeEscalation": False,
                                                        "capabilities": {"drop": ["ALL"]}}}]}}
    path = tmp_path / "pod.json"
    path.write_text(json.dumps(pod))
    return str(path)


def test_launcher_pods_are_admitted_under_restricted(control_plane, tmp_path):
    cp = control_plane
    labels = pod_security_labels()
    assert "pod-security.kubernetes.io/enforce=restricted" in labels
    with cp.namespace("e2e-psa") as namespace:
        cp.kubectl("label", "namespace", namespace, "--overwrite", *labels)
        refused = cp.kubectl("create", "--dry-run=server", "-n", namespace, "-f", unconfined_pod(tmp_path),
                             check=False)
        assert refused.returncode != 0 and "violates PodSecurity" in refused.stderr, refused
        assert "seccompProfile" in refused.stderr

        args = ("submit", "--backend", "k8s", "-n", namespace, "--name", JOB, "--workers", "1", "--ps", "1",
                "--chief", "1", "--evaluator", "1")
        with launcher_process(cp, *args) as launcher:
            pods = wait_running(cp, namespace, JOB, 4)
            cp.finish_pod(namespace, f"{JOB}-chief-0", 0)
            exit_code = launcher.wait(FINISH_TIMEOUT_S)
        assert exit_code == 0, launcher.output
        for pod in pods:
            assert pod["spec"]["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
