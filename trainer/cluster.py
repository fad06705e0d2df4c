"""TF_CONFIG as the Kubeflow training-operator writes it, parsed and checked.

    {"cluster": {"chief": [...], "ps": [...], "worker": [...]},
     "task": {"type": "worker", "index": 0}, "environment": "cloud"}

`master` is accepted as the chief (older seed configs). The evaluator is never part of
`cluster` (the operator leaves it out; a coordinator that sees it hangs). No TF_CONFIG at
all means a single process.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

CLUSTER_ROLES = ("chief", "ps", "worker")
ROLES = CLUSTER_ROLES + ("evaluator",)
ALIASES = {"master": "chief"}
PROXY_VARS = ("https_proxy", "HTTPS_PROXY", "http_proxy", "HTTP_PROXY", "grpc_proxy")
LOCAL_HOSTS = ("127.0.0.1", "localhost")


class ConfigError(ValueError):
    """TF_CONFIG is unusable; the message names the field and the fix."""


@dataclass(frozen=True)
class Cluster:
    """This process's place in the job."""

    role: str = "chief"  # chief, ps, worker or evaluator
    index: int = 0
    spec: dict[str, list[str]] = field(default_factory=dict)  # empty: single process

    @property
    def mode(self) -> str:
        """`ps` (parameter servers), `sync` (MultiWorkerMirrored) or `single`."""
        if self.spec.get("ps"):
            return "ps"
        if sum(len(hosts) for hosts in self.spec.values()) > 1:
            return "sync"
        return "single"

    @property
    def name(self) -> str:
        return f"{self.role}/{self.index}"

    @property
    def is_chief(self) -> bool:
        """The replica that logs, checkpoints and exports: the chief, else worker 0."""
        if self.role == "chief":
            return True
        return self.role == "worker" and self.index == 0 and not self.spec.get("chief")

    @property
    def chief_address(self) -> str | None:
        hosts = self.spec.get("chief") or []
        return hosts[0] if hosts else None

    def hosts(self) -> list[str]:
        """Host names of every cluster member (for no_grpc_proxy)."""
        return sorted({address.rsplit(":", 1)[0] for hosts in self.spec.values() for address in hosts})


def _role(name: object, where: str) -> str:
    role = ALIASES.get(name, name) if isinstance(name, str) else name
    if role not in ROLES:
        raise ConfigError(f"TF_CONFIG {where}: unknown role {name!r}; use one of chief (or master), ps, worker, evaluator")
    return role


def _spec(cluster: object) -> dict[str, list[str]]:
    if not isinstance(cluster, dict) or not cluster:
        raise ConfigError('TF_CONFIG cluster: must be a non-empty object like {"chief": ["host:port"], ...}')
    spec: dict[str, list[str]] = {}
    for name, hosts in cluster.items():
        role = _role(name, "cluster")
        if role == "evaluator":
            raise ConfigError("TF_CONFIG cluster: the evaluator must not be in the cluster; remove it "
                              "(it runs beside the job, as training-operator does)")
        if role in spec:
            raise ConfigError("TF_CONFIG cluster: both chief and master given; keep one")
        if not isinstance(hosts, list) or not all(isinstance(h, str) and ":" in h for h in hosts):
            raise ConfigError(f'TF_CONFIG cluster.{name}: must be a list of "host:port" strings')
        spec[role] = list(hosts)
    if len(spec.get("chief", [])) > 1:
        raise ConfigError("TF_CONFIG cluster.chief: at most one chief; list the others as worker")
    if spec.get("ps") and not spec.get("chief"):
        raise ConfigError("TF_CONFIG cluster: ps without a chief; parameter-server training needs a chief as coordinator")
    if spec.get("ps") and not spec.get("worker"):
        raise ConfigError("TF_CONFIG cluster: ps without workers; parameter-server training needs at least one worker")
    return spec


def _task(task: object, spec: dict[str, list[str]]) -> tuple[str, int]:
    if not isinstance(task, dict):
        raise ConfigError('TF_CONFIG task: must be an object like {"type": "worker", "index": 0}')
    role = _role(task.get("type"), "task.type")
    index = task.get("index", 0)
    if not isinstance(index, int) or isinstance(index, bool) or index < 0:
        raise ConfigError(f"TF_CONFIG task.index: {index!r} is not an integer >= 0")
    count = 1 if role == "evaluator" else len(spec.get(role, []))
    if index >= count:
        raise ConfigError(f"TF_CONFIG task.index: {role} index {index} is out of range; "
                          f"the cluster has {count} {role} task(s)")
    return role, index


def parse(text: str | None) -> Cluster:
    """The Cluster described by a TF_CONFIG value (None or blank: single process)."""
    if text is None or not text.strip():
        return Cluster()
    try:
        config = json.loads(text)
    except json.JSONDecodeError as error:
        raise ConfigError(f"TF_CONFIG: malformed JSON ({error.msg} at char {error.pos}); "
                          "fix the value or unset TF_CONFIG to train in one process") from None
    if not isinstance(config, dict):
        raise ConfigError("TF_CONFIG: must be a JSON object with cluster and task")
    if not config:
        return Cluster()  # "{}": TensorFlow reads this as no cluster too
    spec = _spec(config.get("cluster"))
    role, index = _task(config.get("task"), spec)
    return Cluster(role=role, index=index, spec=spec)


def tf_config(cluster: Cluster) -> str:
    """The normalized TF_CONFIG (master renamed chief) for TensorFlow's own readers."""
    return json.dumps({"cluster": cluster.spec, "task": {"type": cluster.role, "index": cluster.index},
                       "environment": "cloud"})


def bypass_grpc_proxy(cluster: Cluster, environ=os.environ) -> None:
    """Keep replica-to-replica gRPC off any proxy.

    gRPC honours https_proxy like libcurl does, and a PS cluster talking through a proxy
    hangs. `no_grpc_proxy` (read by gRPC only, before no_proxy) lists the cluster hosts, so
    GCS traffic still uses the proxy while gRPC goes direct.
    """
    if not any(environ.get(name) for name in PROXY_VARS):
        return
    current = environ.get("no_grpc_proxy") or environ.get("no_proxy") or environ.get("NO_PROXY") or ""
    hosts = [h for h in current.split(",") if h]
    for host in (*LOCAL_HOSTS, *cluster.hosts()):
        if host not in hosts:
            hosts.append(host)
    environ["no_grpc_proxy"] = ",".join(hosts)
