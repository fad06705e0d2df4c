"""TF_CONFIG exactly as Kubeflow training-operator v1.9 writes it into each pod.

Operator rules (pkg/controller.v1/tensorflow): the cluster has one key per replica type,
lower-cased, with `<job>-<type>-<i>.<namespace>.svc:<port>` per replica; the Evaluator is
not part of the cluster; `task` is the lower-cased type and index; `environment: cloud`.
No TF_CONFIG at all when the whole job has exactly one replica. Keys are sorted, as Go's
json.Marshal sorts map keys. This is the one implementation: the local backend uses it
with its own address function, and tests compare it with what the real operator writes.
"""
from __future__ import annotations

import json
from typing import Callable, Iterator

from .spec import TF_PORT, replica_name

Address = Callable[[str, int], str]  # (lower-case type, index) -> "host:port"
EVALUATOR = "Evaluator"


def replica_counts(tfjob: dict) -> dict[str, int]:
    """{"Chief": 1, "PS": 1, ...} from a rendered TFJob (missing replicas means 1)."""
    specs = tfjob["spec"]["tfReplicaSpecs"]
    return {rtype: int(spec.get("replicas", 1)) for rtype, spec in specs.items()}


def replicas(tfjob: dict) -> Iterator[tuple[str, int]]:
    """Every (replica type, index) of the job, in manifest order."""
    for rtype, count in replica_counts(tfjob).items():
        for index in range(count):
            yield rtype, index


def tf_port(tfjob: dict, rtype: str) -> int:
    """Port of the `tfjob-port` port of the `tensorflow` container (operator default 2222)."""
    template = tfjob["spec"]["tfReplicaSpecs"][rtype]["template"]
    for container in template["spec"]["containers"]:
        if container.get("name") == "tensorflow":
            for port in container.get("ports") or []:
                if port.get("name") == "tfjob-port":
                    return int(port["containerPort"])
    return TF_PORT


def service_address(tfjob: dict) -> Address:
    """The in-cluster address function: the headless service DNS name of each replica."""
    meta = tfjob["metadata"]
    namespace = meta.get("namespace", "default")
    types = {rtype.lower(): rtype for rtype in tfjob["spec"]["tfReplicaSpecs"]}

    def address(rt: str, index: int) -> str:
        return f"{replica_name(meta['name'], rt, index)}.{namespace}.svc:{tf_port(tfjob, types[rt])}"

    return address


def cluster_spec(tfjob: dict, address: Address | None = None) -> dict[str, list[str]]:
    address = address or service_address(tfjob)
    cluster = {}
    for rtype, count in replica_counts(tfjob).items():
        if rtype == EVALUATOR:
            continue
        rt = rtype.lower()
        cluster[rt] = [address(rt, i) for i in range(count)]
    return dict(sorted(cluster.items()))


def is_distributed(tfjob: dict) -> bool:
    return sum(replica_counts(tfjob).values()) != 1


def tf_config(tfjob: dict, rtype: str, index: int, address: Address | None = None) -> str | None:
    """The TF_CONFIG value of replica (rtype, index), or None where the operator sets none."""
    if not is_distributed(tfjob):
        return None
    config = {
        "cluster": cluster_spec(tfjob, address),
        "task": {"type": rtype.lower(), "index": index},
        "environment": "cloud",
    }
    return json.dumps(config, separators=(",", ":"))
