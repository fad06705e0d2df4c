"""One training run's state and the actions the loop takes at step boundaries.

Shared by parameter-server and synchronous training; what differs (strategy, dataset,
how a call is dispatched) stays in train/ps.py / train/sync.py.
"""
from __future__ import annotations

import argparse
import signal
import threading
from concurrent import futures
from dataclasses import dataclass, field
from typing import Any, Callable

import keras
import tensorflow as tf

from trainer import checkpoints, data, evaluator, export, lifecycle, models, progress, variables
from trainer.train import step as train_step
from trainer.cluster import Cluster
from trainer.evaluate import Evaluation


@dataclass
class Session:
    args: argparse.Namespace
    cluster: Cluster
    model: keras.Model  # the distributed model
    optimizer: keras.optimizers.Optimizer
    step: tf.Variable
    saver: checkpoints.Checkpointer = field(init=False)
    progress: progress.Progress = field(init=False)
    start: int = field(init=False)  # the global step this run began at
    saved_at: int | None = field(init=False)  # step of the last checkpoint written or restored
    _evaluation: Evaluation | None = field(init=False, default=None)
    evaluator_seen: bool = field(init=False, default=False)
    graph_written: bool = field(init=False, default=False)
    # The coordinator of parameter-server training evaluates aside (see at()): its workers
    # train on meanwhile. Elsewhere evaluation is the training processes' own time anyway.
    evaluate_aside: bool = field(init=False, default=False)
    _aside: list[tuple[futures.Future, Callable[[Any], None]]] = field(init=False, default_factory=list)
    _aside_thread: futures.ThreadPoolExecutor | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        chief = self.cluster.is_chief
        if chief:
            for line in variables.placement(self.model):
                print(line)
        parts = checkpoints.groups(self.model, self.optimizer, self.step)
        self.saver = checkpoints.Checkpointer(self.args.job_dir, parts, self.args.model, writer=chief)
        restored = self.saver.restore()
        self.start = int(self.step.numpy())
        if chief or restored:  # every MultiWorkerMirrored worker says what it restored
            print(f"Restored {restored} at step {self.start}" if restored
                  else f"No checkpoint in {self.saver.directory}; starting at step 0")
        if chief and restored and self.start >= self.args.train_steps:
            print(f"Nothing to train: step {self.start} reaches --train-steps {self.args.train_steps}; the restored "
                  "model is evaluated and exported (a larger --train-steps trains on, a new --job-dir starts over)")
        self.progress = progress.Progress(self.args.job_dir, self.cluster.name, self.args.train_steps,
                                          self.start, scalars=chief)
        self.saved_at = self.start if restored else None
        self.evaluate_aside = self.cluster.mode == "ps" and chief

    @property
    def train_metrics(self) -> tuple[str, ...]:
        """Names of the values a training call returns after loss and accuracy."""
        return getattr(models.get(self.args.model), "TRAIN_METRICS", ())

    # ---- actions -----------------------------------------------------------------
    @property
    def evaluation(self) -> Evaluation:
        """A plain copy of the model and the test set, made on first use (chief only)."""
        if self._evaluation is None:
            self._evaluation = Evaluation(models.build(self.args.model), data.source(self.args),
                                          self.args.eval_batch_size, self.args.threads, self.args.model)
        return self._evaluation

    def evaluate(self) -> dict[str, float]:
        variables.copy(self.model, self.evaluation.model)
        return self.evaluation.evaluate()

    def learning_rate(self) -> float:
        """The optimizer's current learning rate (its schedule at its own step count)."""
        return float(tf.convert_to_tensor(self.optimizer.learning_rate))

    def write_graph(self) -> None:
        """The model's forward graph for TensorBoard, once (chief only); traced aside when
        evaluations are (it uses the evaluation's model)."""
        if self.graph_written or not self.cluster.is_chief:
            return
        model = self.evaluation.model
        spec = models.get(self.args.model).input_spec()
        trace = lambda: tf.function(lambda inputs: model(inputs, training=False)).get_concrete_function(spec).graph
        self._run(trace, self.progress.train.graph)
        self.graph_written = True

    def _evaluate_at(self, step: int) -> None:
        """The periodic evaluation of the weights at `step`. Aside: the weights are copied
        now, then evaluated in the evaluation thread while the loop goes on dispatching, and
        the Eval line comes from the first at() after it finished (or finish())."""
        self._collect(wait=True)  # the previous one done: it evaluates the same plain model
        variables.copy(self.model, self.evaluation.model)
        self._run(self.evaluation.evaluate, lambda metrics: self.progress.report_eval(step, **metrics))

    def _run(self, work: Callable[[], Any], report: Callable[[Any], None]) -> None:
        """report(work()), or with evaluate_aside: work() in the evaluation thread (one job
        at a time, in order) and report(result) by a later _collect() in this thread, so
        that printing and summary writing stay in the loop's thread."""
        if not self.evaluate_aside:
            report(work())
            return
        if self._aside_thread is None:
            self._aside_thread = futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="evaluation")
        self._aside.append((self._aside_thread.submit(work), report))

    def _collect(self, wait: bool) -> None:
        """Report the finished jobs of the evaluation thread, oldest first (with `wait`: all,
        waiting for them); a job's error is raised here."""
        while self._aside and (wait or self._aside[0][0].done()):
            job, report = self._aside.pop(0)
            report(job.result())

    def _note_evaluator(self) -> None:
        if not self.evaluator_seen:
            print(f"Side-car evaluator running ({evaluator.alive_path(self.args.job_dir)}); leaving the periodic "
                  f"evaluation to it: it evaluates each checkpoint (--checkpoint-every-steps "
                  f"{self.args.checkpoint_every_steps}), not every --eval-every-steps {self.args.eval_every_steps}")
            self.evaluator_seen = True

    def save(self) -> None:
        step = int(self.step.numpy())
        if step != self.saved_at:
            self.saver.save(step)
            self.saved_at = step

    def at(self, before: int, after: int) -> None:
        """Log, evaluate and checkpoint when `after` crosses the configured intervals."""
        args = self.args
        self._collect(wait=False)
        if crossed(before, after, args.log_every_steps) or after >= args.train_steps:
            self.progress.report_train(after, learning_rate=self.learning_rate())
            self.write_graph()
        if crossed(before, after, args.histogram_every_steps) and self.cluster.is_chief:
            self.progress.train.histograms(after, {v.path: variables.read(v) for v in self.model.weights})
        if crossed(before, after, args.eval_every_steps) and after < args.train_steps and self.cluster.is_chief:
            if args.checkpoint_every_steps and evaluator.alive(args.job_dir):  # it evaluates the checkpoints
                self._note_evaluator()
            else:
                self._evaluate_at(after)
        if crossed(before, after, args.checkpoint_every_steps) and after < args.train_steps:
            self.save()

    def finish(self) -> str | None:
        """Final checkpoint, evaluation and export; returns the export path (chief only)."""
        self.save()
        if not self.cluster.is_chief:
            return None
        self._collect(wait=True)
        step = int(self.step.numpy())
        metrics = self.evaluate()
        self.progress.report_eval(step, **metrics)
        print(progress.final_line(step, **metrics))
        path = export.export(self.evaluation.model, self.args.job_dir, self.args.model, data.source(self.args))
        print(progress.export_line(path))
        return path


def start(args: argparse.Namespace, cluster: Cluster, strategy: tf.distribute.Strategy) -> Session:
    """Model, optimizer and global step made inside strategy.scope() (so under PS they are
    created on the ps tasks), then restored from the latest checkpoint. First the model's
    parser reads the first record of each split (data.check): after the strategy, which
    MultiWorkerMirrored needs made before any TensorFlow op runs."""
    data.check(args)
    with strategy.scope():
        model = models.build(args.model)
        optimizer = train_step.build_optimizer(model, train_step.learning_rate(args))
        step = train_step.global_step()
    return Session(args, cluster, model, optimizer, step)


def crossed(before: int, after: int, every: int) -> bool:
    return every > 0 and after // every > before // every


WAKE_S = 0.5


class Stopped(Exception):
    """The chief stopped on SIGTERM (or Ctrl-C's SIGINT, run by hand) after saving a checkpoint
    at the step it had reached; `code`: 128 + the signal (143 for SIGTERM: retryable for
    training-operator's ExitCode policy)."""

    def __init__(self, message: str, signum: int = signal.SIGTERM):
        super().__init__(message)
        self.code = 128 + signum


class StopRequest:
    """Notes SIGTERM (pod deletion, a spot VM's preemption: Kubernetes then grants 30 s by
    default) or SIGINT (Ctrl-C) so that the loop saves a checkpoint and stops at once instead
    of dying mid-interval (the variables must still be reachable: a ps stopped at the same
    moment serves on until the chief has left, lifecycle's rule 4). Only in the main thread.
    Under MultiWorkerMirrored, whose checkpoints every worker must write together, the
    request is voted on in the next call (see run)."""

    def __init__(self):
        self.enabled = threading.current_thread() is threading.main_thread()
        self.signum: int | None = None
        self._previous = None

    SIGNALS = lifecycle.STOP_SIGNALS  # SIGINT: Ctrl-C on a trainer run by hand

    def __enter__(self) -> "StopRequest":
        if self.enabled:
            self._previous = {signum: signal.signal(signum, self._note) for signum in self.SIGNALS}
        return self

    def _note(self, signum, frame) -> None:
        self.signum = self.signum or signum

    def __exit__(self, *exc) -> None:
        if self.enabled:
            for signum, previous in self._previous.items():
                signal.signal(signum, previous)

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name if self.signum else "SIGTERM"

    @property
    def requested(self) -> bool:
        return self.signum is not None


def run(session: Session, launch, in_flight: int, count: bool = False, vote: bool = False
        ) -> tuple[int, str | None]:
    """Dispatch `launch(n, stopping)` calls until --train-steps, keeping at most `in_flight`
    pending, and take their results in the order they complete (one slow worker holds up
    only its own call); then finish. Each call returns a handle: wait() blocks until the
    call finished (run in a waiting thread per pending call), then fetch() gives (loss,
    accuracy, the model's metrics) (run in this thread, one at a time: see train/ps.py
    Call).
    count: the calls do not count their steps (see train/step.py make_train_fn), so set the
    global step to the steps of the calls fetched so far, the only writer of it; a
    checkpoint then holds exactly the step it is numbered by.
    On SIGTERM: within WAKE_S, save a checkpoint at the step reached (the results it
    has; calls still out are redone after the restart) and raise Stopped.
    vote (MultiWorkerMirrored): `stopping` tells the call whether this worker got SIGTERM,
    and its result ends with how many workers did (all-reduced); all workers stop, save
    and raise Stopped after the first call with a vote, at the same step.
    Returns the final step and the export path (None on non-chief workers)."""
    args = session.args
    scheduled = done = session.start
    voted = False  # a worker of this MultiWorkerMirrored job got SIGTERM (vote)
    pending: dict[futures.Future, tuple[int, Any]] = {}  # a call's wait -> (its steps, its handle)
    waiters = futures.ThreadPoolExecutor(max_workers=in_flight, thread_name_prefix="wait")
    try:
        with StopRequest() as stop:
            while done < args.train_steps and not (voted if vote else stop.requested):
                while scheduled < args.train_steps and len(pending) < in_flight:
                    n = min(args.steps_per_execution, args.train_steps - scheduled)
                    call = launch(n, stop.requested)
                    pending[waiters.submit(call.wait)] = (n, call)
                    scheduled += n
                # a bounded wait: SIGTERM is acted on within WAKE_S, without waiting for a result
                finished, _ = futures.wait(pending, timeout=WAKE_S, return_when=futures.FIRST_COMPLETED)
                for future in finished:
                    n, call = pending.pop(future)
                    future.result()  # an error of the wait itself
                    result = call.fetch()
                    if result is None:  # the call failed; ClusterCoordinator holds its error for the
                        scheduled -= n  # next schedule, which raises it (or, recovered, runs these steps)
                        continue
                    if vote:
                        *result, votes = result
                        voted = voted or votes > 0
                    loss, accuracy, *extra = result
                    session.progress.add(n, float(loss), float(accuracy),
                                         **dict(zip(session.train_metrics, map(float, extra))))
                    done += n
                    if count:
                        session.step.assign(done)
                    session.at(done - n, done)
    finally:
        waiters.shutdown(wait=False, cancel_futures=True)
    if voted or (stop.requested and not vote):
        session.save()  # under MultiWorkerMirrored: every worker, at the same step
        why = stop.name if stop.requested else "a peer got SIGTERM"
        signum = stop.signum if stop.requested else signal.SIGTERM
        raise Stopped(f"{why}: saved checkpoint at step {int(session.step.numpy())} in "
                      f"{session.saver.directory}; exiting {128 + signum} (retryable): a restart resumes there",
                      signum)
    path = session.finish()
    return int(session.step.numpy()), path
