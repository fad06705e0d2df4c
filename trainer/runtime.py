"""TensorFlow process setup shared by the roles: thread pools, the server, the resolver."""
from __future__ import annotations

import math
import os

import tensorflow as tf
# The server's own modules (tf.distribute.Server, tf.train.ClusterSpec and
# tf.compat.v1.ConfigProto are these): a ps or worker imports only them (task.serve).
from tensorflow.core.protobuf import config_pb2
from tensorflow.python.training import server_lib

from trainer.cluster import LOCAL_HOSTS, Cluster

CGROUP_CPU_MAX = "/sys/fs/cgroup/cpu.max"  # cgroup v2: "QUOTA PERIOD" or "max PERIOD"


def cpu_limit(path: str = CGROUP_CPU_MAX) -> int | None:
    """CPUs this container may use by its CPU limit (a pod's resources.limits.cpu), rounded
    up; None without a limit. TensorFlow sizes its pools by the node's cores instead."""
    try:
        with open(path) as handle:
            quota, period = handle.read().split()[:2]
    except (OSError, ValueError):
        return None
    if quota == "max":
        return None
    return max(1, math.ceil(int(quota) / int(period)))


def co_located(cluster: Cluster) -> bool:
    """Every task of the cluster on this machine (the local backend)."""
    return bool(cluster.spec) and all(host in LOCAL_HOSTS for host in cluster.hosts())


def default_threads(cluster: Cluster, cpus: int | None = None, limit: int | None = None) -> int:
    """Intra-op threads when --threads is 0 (0: TensorFlow's own default).

    Tasks on one machine share its cores: the training tasks (workers, and the chief of
    synchronous training) split them; a ps mostly waits on the network and gets one
    thread, as does a side-car evaluator, which runs beside the training. The coordinator
    (the chief of parameter-server training) waits too, but it evaluates on the test set,
    beside the training (session.Session.evaluate_aside), and each Eval line waits for
    that: it gets every core for it. Elsewhere a CPU limit caps the pool."""
    cpus = cpus or os.cpu_count() or 1
    limit = limit if limit is not None else cpu_limit()
    if co_located(cluster):
        if cluster.mode == "ps" and cluster.role == "chief":  # the coordinator
            return min(limit or cpus, cpus)
        if cluster.mode == "ps" and cluster.role != "worker":  # ps, side-car evaluator (beside the training)
            return 1
        trainers = len(cluster.spec.get("worker", [])) + (len(cluster.spec.get("chief", [])) if cluster.mode == "sync" else 0)
        return max(1, min(limit or cpus, cpus) // max(1, trainers))
    return limit or 0


def threads_for(threads: int, cluster: Cluster) -> int:
    """--threads, or default_threads() when it is 0."""
    return threads or default_threads(cluster)


def inter_op_threads(threads: int) -> int:
    # Collectives and dataset iterators block inter-op threads; one alone can deadlock.
    return max(2, threads)


def limit_threads(threads: int) -> None:
    """Thread pools of this process's eager context (0 leaves TensorFlow's defaults)."""
    if threads:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(inter_op_threads(threads))


def session_config(threads: int) -> config_pb2.ConfigProto:
    if not threads:
        return config_pb2.ConfigProto()
    return config_pb2.ConfigProto(intra_op_parallelism_threads=threads,
                                  inter_op_parallelism_threads=inter_op_threads(threads))


def cluster_spec(cluster: Cluster) -> server_lib.ClusterSpec:
    return server_lib.ClusterSpec(cluster.spec)


def start_server(cluster: Cluster, threads: int) -> server_lib.Server:
    """The in-process gRPC server of a ps or worker task."""
    return server_lib.Server(cluster_spec(cluster), job_name=cluster.role, task_index=cluster.index,
                             protocol="grpc", config=session_config(threads), start=True)


def resolver(cluster: Cluster) -> tf.distribute.cluster_resolver.ClusterResolver:
    return tf.distribute.cluster_resolver.SimpleClusterResolver(
        cluster_spec(cluster), task_type=cluster.role, task_id=cluster.index, rpc_layer="grpc")
