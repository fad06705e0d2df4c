"""What the local backend runs for each replica of a rendered TFJob.

The plan is derived from the manifest only: the `tensorflow` container's command + args
(image ignored; a leading python/python3 runs under this interpreter), or
`python -m trainer.task` + args without a command; its env list and workingDir; TF_CONFIG from the one
generator in `launcher.tfconfig`, with every replica mapped to a free 127.0.0.1 port; and
each replica's CPU priority on this one machine (`replica_nice`).
"""
from __future__ import annotations

import errno
import os
import re
import shlex
import socket
import sys
from contextlib import ExitStack
from pathlib import Path

from ...events import short_replica
from ...spec import TRAINER_MODULE
from ...tfconfig import replica_counts, replicas, tf_config
from ..base import BackendError
from .secrets import secret_refs

REPO_ROOT = str(Path(__file__).resolve().parents[3])
DEFAULT_RESTART_POLICY = "Never"  # training-operator's default for TFJob replicas
_PYTHON = re.compile(r"^python(3(\.\d+)?)?$")
_PROXIES = ("https_proxy", "HTTPS_PROXY", "http_proxy", "HTTP_PROXY")
LOCAL_HOSTS = ("127.0.0.1", "localhost")
# How much lower the ps and workers of parameter-server training run than the chief: the
# CFS weight of nice 10 is about a ninth of nice 0's, so the chief's dispatch and its
# evaluations get the CPU they ask for and the servers the rest (README, The local backend).
SERVER_NICE = 10


def free_ports(count: int) -> list[int]:
    """`count` distinct free TCP ports on 127.0.0.1 (held open together while picking)."""
    with ExitStack() as stack:
        ports = []
        try:
            for _ in range(count):
                sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
                sock.bind(("127.0.0.1", 0))
                ports.append(sock.getsockname()[1])
        except OSError as err:  # out of file descriptors (ulimit -n) or of ephemeral ports
            raise BackendError(f"cannot reserve a 127.0.0.1 port for each of the job's {count:,} replicas "
                               f"({len(ports):,} reserved: {err.strerror}); use fewer replicas here"
                               f"{', raise the open-file limit (ulimit -n)' if err.errno == errno.EMFILE else ''}"
                               ", or a cluster (--backend k8s)") from None
        return ports


def container(tfjob: dict, rtype: str) -> dict:
    """The `tensorflow` container of replica type `rtype` (the operator's default name)."""
    containers = tfjob["spec"]["tfReplicaSpecs"][rtype]["template"]["spec"]["containers"]
    return next((c for c in containers if c.get("name") == "tensorflow"), containers[0])


def replica_argv(spec: dict) -> list[str]:
    """The local command line of a container: command + args, or the trainer module."""
    args = [str(a) for a in spec.get("args") or []]
    command = [str(c) for c in spec.get("command") or []]
    if not command:
        return [sys.executable, "-m", TRAINER_MODULE, *args]
    if _PYTHON.match(command[0]):
        command[0] = sys.executable
    return command + args


def proxy_env(environ: dict) -> dict[str, str]:
    """no_proxy/NO_PROXY with 127.0.0.1,localhost when a proxy is set (gRPC honours it)."""
    if not any(environ.get(name) for name in _PROXIES):
        return {}
    current = environ.get("no_proxy") or environ.get("NO_PROXY") or ""
    hosts = [h for h in current.split(",") if h]
    value = ",".join(hosts + [h for h in LOCAL_HOSTS if h not in hosts])
    return {"no_proxy": value, "NO_PROXY": value}


def container_env(spec: dict) -> dict[str, str]:
    """The container's literal env entries (valueFrom needs a cluster and is skipped)."""
    return {e["name"]: str(e["value"]) for e in spec.get("env") or [] if "value" in e}


def declared(spec: dict) -> list[tuple[str, bool]]:
    """The container's env names in its order, each with whether a Secret gives its value,
    then TF_CONFIG, which the training-operator adds to each replica's container."""
    return [(e["name"], "valueFrom" in e) for e in spec.get("env") or [] if "value" in e or "valueFrom" in e] \
        + [("TF_CONFIG", False)]


def replica_env(tfjob: dict, rtype: str, index: int, address, environ: dict) -> dict[str, str | None]:
    """Env overrides of one replica; None means "unset" (no TF_CONFIG for a 1-replica job).
    PYTHONPATH: the container's own first (--package-path), then the launcher's checkout
    (the trainer package), then this environment's."""
    env = container_env(container(tfjob, rtype))
    python_path = [p for source in (env.get("PYTHONPATH", ""), REPO_ROOT, environ.get("PYTHONPATH", ""))
                   for p in source.split(os.pathsep) if p]
    return {
        **env,
        **proxy_env(environ),
        "PYTHONPATH": os.pathsep.join(dict.fromkeys(python_path)),
        "PYTHONUNBUFFERED": "1",
        "TF_CONFIG": tf_config(tfjob, rtype, index, address),
    }


def deciding_replica(tfjob: dict) -> str:
    """The replica whose success is the job's: the chief, else worker-0 (operator rule)."""
    counts = replica_counts(tfjob)
    for rtype in ("Chief", "Master", "Worker"):
        if counts.get(rtype, 0) > 0:
            return short_replica(rtype, 0)
    rtype, index = next(replicas(tfjob))
    return short_replica(rtype, index)


def replica_nice(tfjob: dict, rtype: str) -> int:
    """How much to raise the nice value of replicas of type `rtype` (0: left as is).

    On a cluster the chief of parameter-server training has cores of its own; here every
    replica shares this machine's. Here the workers, each busy on a core, would hold
    the chief's dispatch and its periodic evaluation of the test set to a share of the
    CPU, and every Eval line would come seconds after its step. So under PS (the job has ps
    replicas) the ps and workers run SERVER_NICE lower than the chief and an evaluator.
    Synchronous jobs (MultiWorkerMirrored, one process) stay as they are: each worker there
    waits for the slowest, so none may yield to another."""
    under_ps = any(t.lower() == "ps" and count > 0 for t, count in replica_counts(tfjob).items())
    return SERVER_NICE if under_ps and rtype.lower() in ("ps", "worker") else 0


def build_plan(tfjob: dict, environ: dict | None = None) -> dict:
    """Everything the supervisor needs, as JSON-able data."""
    environ = dict(os.environ if environ is None else environ)
    try:
        specs = tfjob["spec"]["tfReplicaSpecs"]
        members = list(replicas(tfjob))
    except (KeyError, TypeError, AttributeError) as err:
        raise BackendError(f"manifest has no spec.tfReplicaSpecs ({err}); render it with `launcher render`") from err
    if not members:
        raise BackendError("manifest has no replicas; use --workers N or --chief 1")
    ports = dict(zip(members, free_ports(len(members))))
    types = {rtype.lower(): rtype for rtype in specs}

    def address(rt: str, index: int) -> str:
        return f"127.0.0.1:{ports[(types[rt], index)]}"

    return {
        "replicas": [
            {
                "id": short_replica(rtype, index),
                "type": rtype,
                "index": index,
                "address": address(rtype.lower(), index),
                "argv": replica_argv(container(tfjob, rtype)),
                "cwd": container(tfjob, rtype).get("workingDir"),  # None: the launcher's
                "env": replica_env(tfjob, rtype, index, address, environ),
                "secretEnv": secret_refs(container(tfjob, rtype)),  # references only, never values
                "declared": declared(container(tfjob, rtype)),  # for $(VAR) in argv and env (expansion)
                "restartPolicy": specs[rtype].get("restartPolicy") or DEFAULT_RESTART_POLICY,
                "nice": replica_nice(tfjob, rtype),
            }
            for rtype, index in members
        ],
        "runPolicy": dict(tfjob["spec"].get("runPolicy") or {}),
        "deciding": deciding_replica(tfjob),
    }


def child_env(overrides: dict, environ: dict) -> dict[str, str]:
    """The full environment of a replica: the supervisor's, then the plan's overrides."""
    env = dict(environ)
    for key, value in overrides.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def command_line(replica: dict) -> str:
    """A shell-readable line of what a replica runs (TF_CONFIG first, then `nice -n N`
    when it runs at a lower priority), for dry runs."""
    tf = replica["env"].get("TF_CONFIG")
    prefix = f"TF_CONFIG={shlex.quote(tf)} " if tf else ""
    nice = replica.get("nice", 0)
    return prefix + (f"nice -n {nice} " if nice else "") + shlex.join(replica["argv"])
