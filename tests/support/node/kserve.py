"""The real KServe controller on a node cluster's control plane (`running_kserve`): the
`manager` of github.com/kserve/kserve at KSERVE_VERSION (scripts/kserve/build.sh builds it
from the Go module proxy), in Standard mode (a Deployment and a Service per predictor: no
Knative, no Istio), with what its own config/ directory installs:

- the CRDs of config/crd/full (its kustomization's list: InferenceService, ServingRuntime,
  ClusterServingRuntime, TrainedModel, InferenceGraph, ClusterStorageContainer);
- the ConfigMap inferenceservice-config of config/configmap/inferenceservice.yaml in the
  namespace kserve, with two settings changed: `deploy.defaultDeploymentMode: Standard`
  (upstream's default is Knative's Serverless) and `ingress.disableIngressCreation: true`
  (no ingress controller here);
- the webhooks of config/webhook/manifests.yaml (the InferenceService defaulter and
  validator, the pod mutator, the ServingRuntime, TrainedModel and InferenceGraph
  validators) with failurePolicy Fail as upstream has them. In a cluster they call the
  Service kserve-webhook-server-service with a cert-manager certificate; here the manager
  runs beside the apiserver in the node's network namespace, so they call it by URL on
  127.0.0.1 over TLS with this control plane's CA (as training-operator's webhook is).

The storage initializer image (kserve/storage-initializer) cannot be pulled here: nothing
the tests serve uses it (a `pvc://` storageUri is a volume the pod mutator mounts; see
launcher/templates/inferenceservice.yaml.j2).
"""
from __future__ import annotations

import contextlib
import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import yaml

from tests.support.controlplane import module_dir, serve_webhook_certs, webhook_client
from tests.support.controlplane.procs import ControlPlaneError, Processes, has_condition, http_ok, wait_until
from tests.support.node.host import in_netns
from tests.support.ports import free_port
from tests.support.tools import ROOT

BUILD_SCRIPT = ROOT / "scripts" / "kserve" / "build.sh"
BINARY = "kserve-manager"
MODULE = "github.com/kserve/kserve"
NAMESPACE = "kserve"  # the manager's POD_NAMESPACE: where it reads inferenceservice-config
CRDS = "config/crd/full"
CONFIGMAP = "config/configmap/inferenceservice.yaml"
WEBHOOKS = "config/webhook/manifests.yaml"
# ours over upstream's inferenceservice-config (each a JSON document under data)
SETTINGS = {"deploy": {"defaultDeploymentMode": "Standard"}, "ingress": {"disableIngressCreation": True}}
PREDICTOR_PORT = 80  # the port of the predictor Service KServe makes (constants.CommonDefaultHttpPort)


def bin_dir() -> Path:
    out = subprocess.run(["bash", str(BUILD_SCRIPT), "--bin-dir"], capture_output=True, text=True,
                         timeout=30, check=True)
    return Path(out.stdout.strip())


def missing() -> str | None:
    """One line naming what is missing to run KServe here, or None."""
    if not os.access(bin_dir() / BINARY, os.X_OK):
        return f"the KServe controller is not built: run {BUILD_SCRIPT.relative_to(ROOT)}"
    return None


def crd_files(module: Path) -> list[Path]:
    """The CRD files of config/crd/full's kustomization (a folder entry: its own list)."""
    def listed(folder: Path) -> list[Path]:
        found = []
        for entry in yaml.safe_load((folder / "kustomization.yaml").read_text())["resources"]:
            path = (folder / entry).resolve()
            found += listed(path) if path.is_dir() else [path]
        return found
    return listed(module / CRDS)


def configmap(module: Path) -> dict:
    """Upstream's inferenceservice-config with SETTINGS merged into its JSON documents."""
    config = yaml.safe_load((module / CONFIGMAP).read_text())
    for key, changes in SETTINGS.items():
        config["data"][key] = json.dumps({**json.loads(config["data"][key]), **changes}, indent=2)
    config["metadata"]["namespace"] = NAMESPACE
    return config


def webhook_configurations(module: Path, port: int, ca: bytes) -> list[dict]:
    """Upstream's webhook configurations, each webhook called by URL (webhook_client)."""
    docs = [doc for doc in yaml.safe_load_all((module / WEBHOOKS).read_text()) if doc]
    for doc in docs:
        doc["metadata"] = {"name": doc["metadata"]["name"]}
        for hook in doc["webhooks"]:
            hook["clientConfig"] = webhook_client(hook, port, ca)
    return docs


def probe(namespace: str) -> dict:
    """An InferenceService both of its webhooks admit: to know they answer."""
    return {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
            "metadata": {"name": "webhook-probe", "namespace": namespace},
            "spec": {"predictor": {"containers": [{"name": "kserve-container", "image": "probe:1"}]}}}


@dataclass
class KServe:
    procs: Processes
    module: Path

    def log_tail(self, lines: int = 40) -> str:
        return self.procs.log_tail(BINARY, lines)


@contextlib.contextmanager
def running_kserve(cluster) -> Iterator[KServe]:
    """Install KServe's CRDs, ConfigMap and webhooks on `cluster` (a NodeCluster) and run
    its manager in the node's network namespace; stop it on exit (the CRDs and webhooks go
    with the cluster)."""
    problem = missing()
    if problem:
        raise ControlPlaneError(problem)
    cp = cluster.cp
    module = module_dir(MODULE, "KSERVE_VERSION")
    workdir = cluster.root / "kserve"
    workdir.mkdir(parents=True, exist_ok=True)
    for crd in crd_files(module):
        cp.kubectl("create", "-f", str(crd))  # create: these CRDs are larger than apply's annotation may be
    names = [yaml.safe_load(crd.read_text())["metadata"]["name"] for crd in crd_files(module)]
    procs = Processes(bin_dir(), cluster.root / "logs", cp.env())
    wait_until("KServe CRDs Established", lambda: all(
        has_condition(cp.kubectl_json("get", f"crd/{name}"), "Established") for name in names), procs, BINARY)
    cp.kubectl("create", "namespace", NAMESPACE)
    (workdir / "configmap.json").write_text(json.dumps(configmap(module)))
    cp.kubectl("create", "-f", str(workdir / "configmap.json"))
    tmpdir = workdir / "tmp"
    serve_webhook_certs(cp.pki, tmpdir)
    health, webhook = free_port(), free_port()
    try:
        with in_netns():
            procs.start(BINARY, BINARY, "--metrics-addr=0", f"--health-probe-addr=127.0.0.1:{health}",
                        f"--webhook-port={webhook}", "--leader-elect=false",
                        env={"KUBECONFIG": str(cp.kubeconfig), "POD_NAMESPACE": NAMESPACE, "TMPDIR": str(tmpdir),
                             "CLUSTER_DOMAIN": "cluster.local"})
            wait_until("kserve-manager /readyz", lambda: http_ok(f"http://127.0.0.1:{health}/readyz"), procs, BINARY)
        hooks = workdir / "webhooks.yaml"
        hooks.write_text(yaml.safe_dump_all(webhook_configurations(module, webhook, cp.pki.ca.read_bytes())))
        cp.kubectl("create", "-f", str(hooks))
        isvc = workdir / "probe.json"
        isvc.write_text(json.dumps(probe(NAMESPACE)))
        wait_until("KServe's InferenceService webhooks answering the apiserver", lambda: cp.kubectl(
            "create", "--dry-run=server", "-f", str(isvc), check=False).returncode == 0, procs, BINARY)
        yield KServe(procs, module)
    finally:
        procs.stop_all()
