"""TensorFlow process setup shared by the roles: thread pools, the server, the resolver."""
from __future__ import annotations

import tensorflow as tf

from trainer.cluster import Cluster


def inter_op_threads(threads: int) -> int:
    # Collectives and dataset iterators block inter-op threads; one alone can deadlock.
    return max(2, threads)


def limit_threads(threads: int) -> None:
    """Thread pools of this process's eager context (0 leaves TensorFlow's defaults)."""
    if threads:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(inter_op_threads(threads))


def session_config(threads: int) -> tf.compat.v1.ConfigProto:
    if not threads:
        return tf.compat.v1.ConfigProto()
    return tf.compat.v1.ConfigProto(intra_op_parallelism_threads=threads,
                                    inter_op_parallelism_threads=inter_op_threads(threads))


def cluster_spec(cluster: Cluster) -> tf.train.ClusterSpec:
    return tf.train.ClusterSpec(cluster.spec)


def start_server(cluster: Cluster, threads: int) -> tf.distribute.Server:
    """The in-process gRPC server of a ps or worker task."""
    return tf.distribute.Server(cluster_spec(cluster), job_name=cluster.role, task_index=cluster.index,
                                protocol="grpc", config=session_config(threads), start=True)


def resolver(cluster: Cluster) -> tf.distribute.cluster_resolver.ClusterResolver:
    return tf.distribute.cluster_resolver.SimpleClusterResolver(
        cluster_spec(cluster), task_type=cluster.role, task_id=cluster.index, rpc_layer="grpc")
