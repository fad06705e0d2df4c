"""Progress lines on stdout (parsed by launcher/events.py) and TensorBoard scalars.

    Train [chief/0] step 200 of 1000: loss 0.2310, accuracy 0.9375 (12.3 s) 16.2 global steps/s
    Eval step 500: loss 0.0612, accuracy 0.9801
    Final metrics after 1000 steps: loss 0.0441, accuracy 0.9862
    Exported model to JOB_DIR/export/1700000000
"""
from __future__ import annotations

import collections
import time

import tensorflow as tf
from tensorboard.plugins.histogram import metadata

from trainer import paths


HISTOGRAM_BUCKETS = 30  # TensorBoard's default
RATE_WINDOW_S = 10.0  # a Train line's steps/s: over at least this long, when lines come faster


def histogram_buckets(data: tf.Tensor, count: int = HISTOGRAM_BUCKETS) -> tf.Tensor:
    """The [count, 3] float64 rows (left edge, right edge, number of values) that
    TensorBoard's tf.summary.histogram writes for `data`: the same edges and the same
    bucket for every value, counted with bincount instead of its one-hot matrix of
    float64 (count x 8 bytes for each value: 190 MB for the default model's dense kernel,
    770 MB for the Cloud ML sample CNN's, every --histogram-every-steps on the chief).
    Values whose bucket cannot be told (NaN) are not counted, as there. Eager only."""
    data = tf.cast(tf.reshape(data, [-1]), tf.float64)
    size = int(tf.size(data))
    if size == 0:
        return tf.zeros((count, 3), tf.float64)
    low, high = tf.reduce_min(data), tf.reduce_max(data)
    if bool(low == high):  # one value: every edge is it, and the last bucket holds all
        edges = tf.fill([count], high)
        counts = tf.concat([tf.zeros([count - 1], tf.float64), tf.constant([size], tf.float64)], 0)
        return tf.transpose(tf.stack([edges, edges, counts]))
    width = (high - low) / count
    index = tf.minimum(tf.cast(tf.floor((data - low) / width), tf.int32), count - 1)
    del data
    index = tf.where(index < 0, count, index)  # NaN's: dropped by maxlength
    counts = tf.math.bincount(index, minlength=count, maxlength=count, dtype=tf.float64)
    edges = tf.linspace(low, high, count + 1)
    edges = tf.concat([edges[:-1], [high]], 0)
    return tf.transpose(tf.stack([edges[:-1], edges[1:], counts]))


def histogram(name: str, data: tf.Tensor, step: int, count: int = HISTOGRAM_BUCKETS) -> None:
    """tf.summary.histogram(name, data, step) as TensorBoard writes it (its tag, plugin
    metadata and buckets), with histogram_buckets: to the default summary writer."""
    with tf.summary.experimental.summary_scope(name, "histogram_summary") as (tag, _):
        tf.summary.write(tag=tag, tensor=histogram_buckets(data, count), step=step,
                         metadata=metadata.create_summary_metadata(display_name=None, description=None))


def _extra(metrics: dict[str, float]) -> str:
    """`, auc 0.8123`...: a model's metrics beyond loss and accuracy, after them."""
    return "".join(f", {name} {value:.4f}" for name, value in metrics.items())


def train_line(name: str, step: int, total: int, loss: float, accuracy: float,
               elapsed: float, rate: float, **extra: float) -> str:
    return (f"Train [{name}] step {step} of {total}: loss {loss:.4f}, accuracy {accuracy:.4f}{_extra(extra)} "
            f"({elapsed:.1f} s) {rate:.2f} global steps/s")


def eval_line(step: int, loss: float, accuracy: float, **extra: float) -> str:
    return f"Eval step {step}: loss {loss:.4f}, accuracy {accuracy:.4f}{_extra(extra)}"


def final_line(step: int, loss: float, accuracy: float, **extra: float) -> str:
    return f"Final metrics after {step} steps: loss {loss:.4f}, accuracy {accuracy:.4f}{_extra(extra)}"


def export_line(path: str) -> str:
    return f"Exported model to {path}"


class Scalars:
    """TensorBoard scalars under JOB_DIR/<name>/ (created on first write).

    `start`: the global step this run of the writing process began at (None: not a run that
    can resume, e.g. the side-car evaluator's, which never writes a step twice). Its
    event file then begins with a SessionLog.START event at step start + 1, as TF1's
    sessions wrote one: TensorBoard's Python loader (--load_fast=false, which `launcher
    tensorboard` runs for gs:// job dirs) drops a run's earlier points from that step on
    at every START after the first, so that the points a killed chief wrote after its
    last checkpoint give way to those its restart writes again. On v2 event files it
    purges on nothing else (a step going back is kept, the line then zigzags); the fast
    loader (RustBoard) replaces them by their step anyway."""

    def __init__(self, job_dir: str, name: str, start: int | None = None):
        self.directory = paths.events(job_dir, name)
        self.start = start
        self._writer = None

    @property
    def writer(self):
        if self._writer is None:
            self._writer = tf.summary.create_file_writer(self.directory)
            if self.start is not None:
                self._session_start(self.start + 1)
        return self._writer

    def _session_start(self, step: int) -> None:
        from tensorflow.core.util import event_pb2
        from tensorflow.python.ops import summary_ops_v2  # import_event: no tf.summary name

        event = event_pb2.Event(wall_time=time.time(), step=step,
                                session_log=event_pb2.SessionLog(status=event_pb2.SessionLog.START))
        with self._writer.as_default():
            summary_ops_v2.import_event(tf.constant(event.SerializeToString()))

    def write(self, step: int, **values: float) -> None:
        with self.writer.as_default():
            for tag, value in values.items():
                tf.summary.scalar(tag, value, step=step)
        self.writer.flush()

    def histograms(self, step: int, tensors: dict[str, tf.Tensor]) -> None:
        """One histogram per tensor (TensorBoard's Histograms and Distributions tabs)."""
        with self.writer.as_default():
            for tag, value in tensors.items():
                histogram(tag, value, step)
        self.writer.flush()

    def graph(self, graph: tf.Graph) -> None:
        """The graph for TensorBoard's Graphs tab."""
        with self.writer.as_default():
            tf.summary.graph(graph)
        self.writer.flush()


class Progress:
    """Averages training metrics between Train lines and reports them. `scalars`: also
    write them for TensorBoard (the chief only: other MultiWorkerMirrored workers print
    their own `Train [worker/N]` lines but leave train/ to the chief)."""

    def __init__(self, job_dir: str, name: str, total: int, start: int, enabled: bool = True,
                 scalars: bool = True):
        self.name, self.total, self.enabled, self.scalars = name, total, enabled, scalars
        self.train = Scalars(job_dir, "train", start)
        self.eval = Scalars(job_dir, "eval", start)
        self.began = time.monotonic()
        # (time, step) of the run's start and of each line since: a line's rate is measured
        # from the newest of them at least RATE_WINDOW_S old (else the start), not from the
        # line before. A parameter-server chief gets its workers' results in bursts, so with
        # lines every call or two the rate since the last line swung 25-fold.
        self.marks: collections.deque[tuple[float, int]] = collections.deque([(self.began, start)])
        self.loss_sum = self.acc_sum = 0.0
        self.extra_sums: dict[str, float] = {}
        self.steps = 0

    def add(self, steps: int, loss: float, accuracy: float, **extra: float) -> None:
        """Metrics of `steps` finished steps (loss, accuracy and `extra` are their means)."""
        self.loss_sum += loss * steps
        self.acc_sum += accuracy * steps
        for name, value in extra.items():
            self.extra_sums[name] = self.extra_sums.get(name, 0.0) + value * steps
        self.steps += steps

    def report_train(self, step: int, **extra: float) -> None:
        """The Train line and its scalars (plus `extra` ones, e.g. learning_rate)."""
        now = time.monotonic()
        if not self.enabled or not self.steps:
            return
        loss, accuracy = self.loss_sum / self.steps, self.acc_sum / self.steps
        metrics = {name: total / self.steps for name, total in self.extra_sums.items()}
        while len(self.marks) > 1 and now - self.marks[1][0] >= RATE_WINDOW_S:
            self.marks.popleft()
        since, since_step = self.marks[0]
        rate = (step - since_step) / max(now - since, 1e-9)
        print(train_line(self.name, step, self.total, loss, accuracy, now - self.began, rate, **metrics))
        if self.scalars:
            self.train.write(step, loss=loss, accuracy=accuracy, global_steps_per_sec=rate, **metrics, **extra)
        self.marks.append((now, step))
        self.extra_sums = {}
        self.loss_sum = self.acc_sum = 0.0
        self.steps = 0

    def report_eval(self, step: int, loss: float, accuracy: float, **extra: float) -> None:
        print(eval_line(step, loss, accuracy, **extra))
        self.eval.write(step, loss=loss, accuracy=accuracy, **extra)
