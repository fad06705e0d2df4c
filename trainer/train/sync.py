"""Synchronous training: MultiWorkerMirroredStrategy across workers (and the chief, if
any) when there are no ps tasks, or the default strategy in a single process.

Every worker runs the same loop; gradients are all-reduced each step. The chief (or
worker 0) logs, evaluates, writes checkpoints and exports; the others save checkpoints
into a scratch dir, as MultiWorkerMirroredStrategy requires every worker to take part.
SIGTERM to any worker (its pod deleted, its spot VM preempted) is voted on in each call's
all-reduce, so every worker saves the same step and exits 143 (session.run).
"""
from __future__ import annotations

import argparse

import tensorflow as tf

from trainer import data, models, runtime, session
from trainer.train import step as train_step
from trainer.cluster import Cluster


class Done:
    """A finished call's result, as session.run takes a call (train/ps.py Call)."""

    def __init__(self, result):
        self.result = result

    def wait(self) -> None:
        """Finished already: the call ran in this process."""

    def fetch(self):
        return [value.numpy() for value in self.result]


def strategy_for(cluster: Cluster) -> tf.distribute.Strategy:
    if cluster.mode == "sync":
        return tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=runtime.resolver(cluster))
    return tf.distribute.get_strategy()


def input_context(cluster: Cluster, strategy: tf.distribute.Strategy) -> tf.distribute.InputContext:
    """This worker's input pipeline among the job's, numbered as MultiWorkerMirroredStrategy
    numbers them (multi_worker_util.id_in_cluster: the chief first, then the workers)."""
    chiefs = len(cluster.spec.get("chief", []))
    pipeline = cluster.index + chiefs if cluster.role == "worker" else 0
    return tf.distribute.InputContext(num_input_pipelines=chiefs + len(cluster.spec.get("worker", [])),
                                      input_pipeline_id=pipeline,
                                      num_replicas_in_sync=strategy.num_replicas_in_sync)


def input_iterator(strategy: tf.distribute.Strategy, cluster: Cluster, dataset_fn):
    """A MultiWorkerMirrored worker whose one replica is its CPU iterates its own pipeline
    (`dataset_fn` of its InputContext) directly: distribute_datasets_from_function would
    put a MultiDeviceIterator in between, which has no devices to prefetch to there and
    makes TensorFlow log 'Input of GeneratorDatasetOp::Dataset will not be optimized' on
    every worker (its plain iterator, InputReplicationMode.PER_REPLICA, is only for
    MirroredStrategy). The one replica gets each batch as it is. Otherwise (one process,
    GPUs): the strategy's distributed dataset."""
    devices = strategy.extended.worker_devices if cluster.mode == "sync" else ()
    if len(devices) == 1 and tf.DeviceSpec.from_string(devices[0]).device_type == "CPU":
        with tf.device(devices[0]):
            return iter(dataset_fn(input_context(cluster, strategy)))
    return iter(strategy.distribute_datasets_from_function(dataset_fn))


def worker_dataset_fn(args: argparse.Namespace):
    """The input pipeline of the InputContext a worker gets (input_context): its share of the
    records, so that the workers read each one at most once per epoch."""
    def dataset_fn(context: tf.distribute.InputContext):
        source = data.source(args)
        return data.dataset(source, "train", args.batch_size, training=True, threads=args.threads,
                            shard=(context.num_input_pipelines, context.input_pipeline_id),
                            parse=models.get(args.model).parser(source))

    return dataset_fn


def run(args: argparse.Namespace, cluster: Cluster) -> tuple[int, str | None]:
    strategy = strategy_for(cluster)
    state = session.start(args, cluster, strategy)
    iterator = input_iterator(strategy, cluster, worker_dataset_fn(args))
    vote = cluster.mode == "sync"  # a SIGTERM to any worker stops them all at the same step
    train = train_step.make_train_fn(strategy, state, stop_vote=vote)
    if not vote:
        return session.run(state, lambda n, stopping: Done(train(iterator, tf.constant(n))), in_flight=1)
    return session.run(state, lambda n, stopping: Done(train(iterator, tf.constant(n), tf.constant(float(stopping)))),
                       in_flight=1, vote=True)
