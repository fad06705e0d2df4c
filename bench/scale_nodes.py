"""Extra KWOK nodes for bench/launcher_scale.py: copies of the first untainted CPU node of
k8s/kwok/nodes.yaml (110 pods each, like a GKE node), as many as `pods` replicas need.
The e2e control plane's own nodes hold 220 CPU pods; a 1051-replica job needs more."""
from __future__ import annotations

import copy
import math

import yaml

import _common  # noqa: F401  (puts the repository on sys.path)

from tests.support.controlplane import KWOK_DIR, ControlPlane, schedulable
from tests.support.controlplane.procs import wait_until


def cpu_node_template() -> dict:
    nodes = yaml.safe_load_all((KWOK_DIR / "nodes.yaml").read_text())
    return next(node for node in nodes if not node.get("spec", {}).get("taints"))


def add_nodes(cp: ControlPlane, pods: int) -> list[str]:
    """Create and wait for (bounded) enough schedulable nodes for `pods` more pods."""
    template = cpu_node_template()
    count = math.ceil(pods / int(template["status"]["allocatable"]["pods"]))
    docs = []
    for index in range(count):
        node = copy.deepcopy(template)
        name = f"kwok-bench-{index}"
        node["metadata"]["name"] = name
        node["metadata"]["labels"]["kubernetes.io/hostname"] = name
        docs.append(node)
    path = cp.workdir / "bench-nodes.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    cp.kubectl("apply", "-f", str(path))
    names = {doc["metadata"]["name"] for doc in docs}

    def ready() -> bool:
        items = cp.kubectl_json("get", "nodes")["items"]
        return sum(1 for n in items if n["metadata"]["name"] in names and schedulable(n)) == len(names)

    wait_until(f"{count} bench nodes Ready and schedulable", ready, cp.procs, "kwok")
    return sorted(names)
