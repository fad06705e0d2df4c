"""The side-car evaluator: evaluates every checkpoint in JOB_DIR/checkpoints, once, in order.

It is not part of the coordinator's cluster (training-operator leaves it out of
TF_CONFIG's cluster; a coordinator that sees it hangs). Each poll it lists the kept
checkpoints (the `checkpoint` state file) and evaluates, oldest first, each one newer
than the last it evaluated: it restores the weights into a plain model (refusing a
checkpoint of another model, exit 2), prints `Eval step N: ...`, writes
JOB_DIR/evaluator/ events and records the step in JOB_DIR/evaluator/evaluated.json, so
that after a restart of its own it goes on after that step instead of repeating points.
A checkpoint it fails to read (being written, or a storage hiccup) is retried at the
next poll, up to READ_ATTEMPTS times; one deleted meanwhile by the chief (it keeps the
newest 5) drops out of the list.

While it runs it refreshes JOB_DIR/evaluator/alive.json: the chief then leaves the
periodic evaluation to it (session.py), and once training is done gives it up to
FINAL_WAIT_S to evaluate the last checkpoint before the chief marks the job done and
exits (await_step): a TFJob ends with its chief, and the operator (cleanPodPolicy
Running) or the local backend then stops the evaluator. It exits when the chief's done
marker appears (after evaluating the last checkpoint) or when the chief is gone for good
(lifecycle.py).
"""
from __future__ import annotations

import argparse
import json
import time

import tensorflow as tf

from trainer import checkpoints, data, lifecycle, models, paths, progress, variables
from trainer.cluster import Cluster
from trainer.evaluate import Evaluation

READ_ATTEMPTS = 3
FINAL_WAIT_S = 60.0  # the chief's wait for an evaluator's result on the last checkpoint
ALIVE_EVERY_S = 30.0  # at most this long between heartbeats
ALIVE_FOR_S = 120.0  # the chief counts on an evaluator whose heartbeat is this recent


def state_path(job_dir: str) -> str:
    return paths.join(paths.events(job_dir, "evaluator"), "evaluated.json")


def alive_path(job_dir: str) -> str:
    return paths.join(paths.events(job_dir, "evaluator"), "alive.json")


def alive(job_dir: str, now: float | None = None) -> bool:
    """Whether a side-car evaluator has refreshed its heartbeat within ALIVE_FOR_S."""
    try:
        with tf.io.gfile.GFile(alive_path(job_dir)) as handle:
            beat = float(json.loads(handle.read())["time"])
    except (tf.errors.OpError, ValueError, KeyError, TypeError):
        return False
    return (now if now is not None else time.time()) - beat < ALIVE_FOR_S


def gone(job_dir: str) -> None:
    """The evaluator leaves: its heartbeat goes, so that a chief does not count on it
    (nor wait for it at the end) for up to ALIVE_FOR_S after."""
    for path in (alive_path(job_dir), f"{alive_path(job_dir)}.tmp"):  # .tmp: a signal between write and rename
        try:
            tf.io.gfile.remove(path)
        except tf.errors.OpError:
            pass


def evaluated(job_dir: str) -> int:
    """The last step the side-car evaluator evaluated (or skipped); -1: none, or a record
    an earlier evaluator left cut short (it wrote the file in place)."""
    try:
        with tf.io.gfile.GFile(state_path(job_dir)) as handle:
            return int(json.loads(handle.read())["step"])
    except (tf.errors.NotFoundError, ValueError, KeyError, TypeError):
        return -1


def await_step(job_dir: str, step: int, seconds: float = FINAL_WAIT_S, poll: float = 1.0) -> bool | None:
    """The chief, training done and its last checkpoint written: when a side-car evaluator
    runs, wait up to `seconds` for it to evaluate `step` (True), else go on (False). None:
    no evaluator runs."""
    if not alive(job_dir):
        return None
    deadline = time.monotonic() + seconds
    if evaluated(job_dir) < step:
        print(f"Waiting up to {seconds:g} s for the side-car evaluator to evaluate step {step}")
    while evaluated(job_dir) < step:
        if time.monotonic() >= deadline:
            print(f"The side-car evaluator has not evaluated step {step} after {seconds:g} s; finishing without it")
            return False
        time.sleep(poll)
    return True


def _write(path: str, content: dict) -> None:
    """Write `content` beside `path`, then rename it over `path`: a reader (the chief) or
    a restarted evaluator finds the last record whole even when a kill cut this write short
    (one writer per file: one evaluator per job)."""
    tf.io.gfile.makedirs(path.rsplit("/", 1)[0])
    with tf.io.gfile.GFile(f"{path}.tmp", "w") as handle:
        handle.write(json.dumps(content))
    tf.io.gfile.rename(f"{path}.tmp", path, overwrite=True)


class SideCar:
    def __init__(self, args: argparse.Namespace):
        model = models.build(args.model)
        self.job_dir, self.model_name = args.job_dir, args.model
        self.directory = paths.checkpoints(args.job_dir)
        self.parts = {"model": variables.named(model.weights)}
        self.ckpt = tf.train.Checkpoint(**self.parts)
        self.evaluation = Evaluation(model, data.source(args), args.eval_batch_size, args.threads, args.model)
        self.scalars = progress.Scalars(args.job_dir, "evaluator")
        self.last_step = evaluated(self.job_dir)  # by an earlier run of this evaluator
        self.attempts: dict[str, int] = {}
        self.beat = 0.0

    def heartbeat(self) -> None:
        now = time.time()
        if now - self.beat >= ALIVE_EVERY_S:
            _write(alive_path(self.job_dir), {"time": now})
            self.beat = now

    def pending(self) -> list[str]:
        """Kept checkpoints newer than the last one evaluated, oldest first."""
        try:
            state = tf.train.get_checkpoint_state(self.directory)
        except tf.errors.OpError as error:  # the state file being replaced, or storage
            print(f"Could not list {self.directory} ({type(error).__name__}); retrying")
            return []
        found = list(state.all_model_checkpoint_paths) if state else []
        return sorted((p for p in found if checkpoints.step_of(p) > self.last_step), key=checkpoints.step_of)

    def evaluate_next(self) -> bool:
        """Evaluate the oldest pending checkpoint; False when there is none to do now."""
        for path in self.pending():
            step = checkpoints.step_of(path)
            try:
                checkpoints.restore_check(path, self.parts, self.job_dir, self.model_name)
                self.ckpt.restore(path).expect_partial()
            except tf.errors.OpError as error:  # NotFound, DataLoss, storage errors; the reader's own
                self.attempts[path] = attempt = self.attempts.get(path, 0) + 1
                if attempt < READ_ATTEMPTS:
                    print(f"Could not read {path} ({type(error).__name__}); retrying "
                          f"(attempt {attempt} of {READ_ATTEMPTS})")
                    return False
                print(f"Skipped {path}: {type(error).__name__} after {attempt} attempts")
                self._done(step)
                continue
            metrics = self.evaluation.evaluate()
            print(progress.eval_line(step, **metrics))
            self.scalars.write(step, **metrics)
            self._done(step)
            return True
        return False

    def _done(self, step: int) -> None:
        self.last_step = step
        _write(state_path(self.job_dir), {"step": step})


def run(args: argparse.Namespace, cluster: Cluster) -> int:
    data.check(args)
    watch = lifecycle.Watch(args.job_dir, cluster.chief_address, args.poll_seconds, args.orphan_seconds)
    sidecar = SideCar(args)
    print(f"Evaluator watching {sidecar.directory}"
          + (f"; evaluated up to step {sidecar.last_step} before" if sidecar.last_step >= 0 else ""))
    while True:
        sidecar.heartbeat()
        if sidecar.evaluate_next():
            continue
        outcome = watch.check()
        if outcome is not None:
            while sidecar.pending():  # the rest, read failures retried (bounded: READ_ATTEMPTS)
                if not sidecar.evaluate_next():
                    time.sleep(args.poll_seconds)
            print(lifecycle.message(outcome, watch))
            return lifecycle.EXIT_CODES[outcome]
        time.sleep(args.poll_seconds)
