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
import threading
import time

import tensorflow as tf

from trainer import data, lifecycle, models, runtime, session
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


FINISH_BARRIER = "trainer:finished"
FINISH_WAIT_S = 3600.0  # the others' longest wait for the leader's evaluation, export and evaluator wait
GONE_WAIT_S = 3.0  # the leader's longest wait for the others to leave: half TensorFlow's 10-s heartbeat timeout


def wait_at_barrier(barrier_id: str, timeout_s: float) -> None:
    """TensorFlow's context.wait_at_barrier (its coordination service's barrier: every
    MultiWorkerMirrored task), called through ctypes, which releases the GIL for the wait:
    TensorFlow's own binding holds it, and a SIGTERM to a task waiting there was acted on
    only when the barrier returned (58 s later in a test, up to FINISH_WAIT_S). Raises the
    tf.errors.OpError of a failed barrier (a peer lost, the timeout)."""
    import ctypes
    import os

    from tensorflow.python.eager import context

    context.ensure_initialized()
    try:
        library = ctypes.CDLL(os.path.join(os.path.dirname(tf.__file__), "libtensorflow_cc.so.2"))
        framework = ctypes.CDLL(os.path.join(os.path.dirname(tf.__file__), "libtensorflow_framework.so.2"))
        framework.TF_NewStatus.restype = ctypes.c_void_p
        framework.TF_GetCode.restype, framework.TF_GetCode.argtypes = ctypes.c_int, [ctypes.c_void_p]
        framework.TF_Message.restype, framework.TF_Message.argtypes = ctypes.c_char_p, [ctypes.c_void_p]
        framework.TF_DeleteStatus.argtypes = [ctypes.c_void_p]
        library.TFE_WaitAtBarrier.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int64, ctypes.c_void_p]
        handle = context.context()._context_handle
    except (OSError, AttributeError):  # another platform's library names (macOS: .dylib), or another
        # TensorFlow's symbols: its own binding, GIL held
        context.context().wait_at_barrier(barrier_id, int(timeout_s * 1000))
        return
    capsule = ctypes.pythonapi.PyCapsule_GetPointer
    capsule.restype, capsule.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    status = framework.TF_NewStatus()
    try:
        library.TFE_WaitAtBarrier(capsule(handle, None), barrier_id.encode(),
                                  int(timeout_s * 1000), status)
        code = framework.TF_GetCode(status)
        if code:
            message = framework.TF_Message(status).decode(errors="replace")
            raise tf.errors.exception_type_from_error_code(code)(None, None, message)
    finally:
        framework.TF_DeleteStatus(status)


def leave(cluster: Cluster) -> None:
    """Every MultiWorkerMirrored task, once its part is done (the leader: also its final
    evaluation, export and wait for a side-car evaluator): wait for all the others at a
    barrier of TensorFlow's coordination service, then the leader (the chief, or worker 0:
    the service runs in its process) waits until the others have left, at most GONE_WAIT_S.
    Without it a task that left first (os._exit: no goodbye to the service) was reported
    by the leader once its heartbeats had stopped for 10 s (`StartAbort UNAVAILABLE ... The
    following tasks are unhealthy (stopped sending heartbeats) ... The tasks have
    crashed`), and a task that outlived the leader reported its own next heartbeat failing
    (`StartAbort UNAVAILABLE: Failed to send RPC to coordination service`), in the logs of
    a job that succeeded. The barrier waits in a thread of its own so that SIGTERM is acted
    on meanwhile; a peer lost during it fails it (failures.lost_peer)."""
    outcome: list[BaseException | None] = []

    def wait() -> None:
        try:
            wait_at_barrier(FINISH_BARRIER, FINISH_WAIT_S)
            outcome.append(None)
        except BaseException as error:  # noqa: BLE001 - raised in the main thread below
            outcome.append(error)

    waiter = threading.Thread(target=wait, name="finish-barrier", daemon=True)
    waiter.start()
    while waiter.is_alive():
        waiter.join(lifecycle.SLICE_S)  # a signal's handler runs between these
    if outcome and outcome[0] is not None:
        raise outcome[0]
    if cluster.is_chief:
        others = [address for role in ("chief", "worker") for index, address in enumerate(cluster.spec.get(role, []))
                  if (role, index) != (cluster.role, cluster.index)]
        deadline = time.monotonic() + GONE_WAIT_S
        while others and time.monotonic() < deadline:
            # refused, or a name that no longer resolves (a finished pod's): gone
            others = [a for a in others if lifecycle.probe(a, max(0.1, deadline - time.monotonic())) is True]
            if others:
                time.sleep(lifecycle.SLICE_S)
