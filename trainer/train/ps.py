"""Asynchronous parameter-server training: the chief is the coordinator.

Variables live on the ps tasks, partitioned with MinSizePartitioner (a variable is split
across the ps tasks, at most one shard per task, each at least --ps-min-shard-bytes);
workers run `train(iterator, n)` closures scheduled by ClusterCoordinator on their own
per-worker dataset. Keras 3 `model.fit` does not work under ParameterServerStrategy, hence
the custom loop.
"""
from __future__ import annotations

import argparse
import threading

import tensorflow as tf

from trainer import data, models, runtime, session
from trainer.train import step as train_step
from trainer.cluster import Cluster


class Call:
    """A scheduled train call (ClusterCoordinator's RemoteValue) as session.run takes it:
    wait() until it finished, in one of the run's waiting threads, running no TensorFlow
    op; then fetch() its values, in the training loop's thread.

    Why not RemoteValue.fetch() in the waiting threads: it copies the values to the
    coordinator with an eager op (an identity under the coordinator's device), and copies
    made from several threads at once at the start of training now and then corrupted a
    request to a worker (TensorFlow 2.21; the chief: "String field
    'tensorflow.eager.Operation.device' contains invalid UTF-8 data when serializing a
    protocol buffer", the worker: "Unable to parse request"), which fails the chief. So
    only the waiting is parallel; the copies are made one at a time."""

    _copy = threading.Lock()  # the copy, where wait() has to make it (below)

    def __init__(self, remote):
        self.remote = remote

    def wait(self) -> None:
        event = getattr(self.remote, "_status_available_event", None)  # set once its values or error are in
        if event is None:  # a TensorFlow whose RemoteValue has none: copy here (fetch() then reuses
            with self._copy:  # the copy), one at a time, at the cost of waiting in turn
                self.remote.fetch()
            return
        event.wait()

    def fetch(self):
        return self.remote.fetch()


def strategy_for(cluster: Cluster, min_shard_bytes: int) -> tf.distribute.ParameterServerStrategy:
    partitioner = tf.distribute.experimental.partitioners.MinSizePartitioner(
        min_shard_bytes=min_shard_bytes, max_shards=len(cluster.spec["ps"]))
    return tf.distribute.ParameterServerStrategy(runtime.resolver(cluster), variable_partitioner=partitioner)


def worker_dataset_fn(args: argparse.Namespace):
    """The input pipeline each worker runs. Built on the coordinator but run by each worker:
    no private thread pool (whose size would be the coordinator's --threads), so tf.data
    runs on the worker's own pools, sized by the worker's threads (runtime.start_server).
    The model's module is looked up here, not in dataset_fn: ClusterCoordinator traces
    dataset_fn with AutoGraph, which would convert the lookup's importlib call and warn
    twice in the chief's log that it could not. The parser itself is made in dataset_fn:
    what it creates (the taxi model's lookup table) must be each worker's own."""
    source, model = data.source(args), models.get(args.model)

    def dataset_fn():
        return data.dataset(source, "train", args.batch_size, training=True, threads=0,
                            parse=model.parser(source))

    return dataset_fn


def run(args: argparse.Namespace, cluster: Cluster) -> tuple[int, str | None]:
    strategy = strategy_for(cluster, args.ps_min_shard_bytes)
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    state = session.start(args, cluster, strategy)
    iterator = iter(coordinator.create_per_worker_dataset(worker_dataset_fn(args)))
    train = train_step.make_train_fn(strategy, state, count_steps=False, worker_lines=args.log_every_steps)

    def launch(n: int, stopping: bool):  # the chief acts on its own SIGTERM (session.run)
        return Call(coordinator.schedule(train, args=(iterator, tf.constant(n))))

    workers = len(cluster.spec["worker"])
    result = session.run(state, launch, in_flight=2 * workers, count=True)
    coordinator.join()
    return result
