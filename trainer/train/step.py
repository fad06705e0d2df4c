"""The training tf.function shared by parameter-server and synchronous training.

`train(iterator, n)` runs `n` steps in an inner loop (several steps per call cuts the
coordinator's dispatch overhead) and returns the mean loss and accuracy of those steps,
then the means of the model's TRAIN_METRICS (the taxi model's batch AUC), if any.
Who counts them in the global step depends on the strategy (see make_train_fn).
"""
from __future__ import annotations

import sys

import keras
import tensorflow as tf

from trainer import flags, models, variables


COSINE_FLOOR = 0.01  # cosine decay ends at this fraction of --learning-rate


def learning_rate(args) -> float | keras.optimizers.schedules.LearningRateSchedule:
    """--learning-rate after a linear warm-up from 0 (--warmup-steps), then constant or
    decayed over the remaining --train-steps (--learning-rate-decay). Warm-up keeps Adam's
    large first steps from throwing asynchronous (parameter-server) training off course.
    The schedule follows the optimizer's own step count, which lives with the variables."""
    warmup = flags.warmup_steps(args)
    decay = args.train_steps - warmup
    alpha = COSINE_FLOOR if args.learning_rate_decay == "cosine" else 1.0  # 1.0: no decay
    if not warmup:
        return keras.optimizers.schedules.CosineDecay(args.learning_rate, decay, alpha=alpha)
    return keras.optimizers.schedules.CosineDecay(0.0, decay, alpha=alpha, warmup_target=args.learning_rate,
                                                  warmup_steps=warmup)


class FusedAdam(keras.optimizers.Adam):
    """Keras 3's Adam, its update of a dense gradient done by TensorFlow's fused
    ResourceApplyAdam kernel: the same formula (m += (g - m)(1 - b1), v += (g² - v)(1 - b2),
    var -= lr·sqrt(1 - b2^t)/(1 - b1^t)·m/(sqrt(v) + eps)) in one pass over the variable
    and its slots instead of about ten elementwise ops, each a pass of its own. Under
    parameter-server training these run on the ps for every step of every worker: the
    unfused ops were about a fifth of the ps's CPU time (perf, bench/ps_vs_single.py).
    Sparse (IndexedSlices) gradients, such as the taxi model's embeddings, and any variable
    that is not a plain resource variable take Keras's own update.

    Its step count goes up by TensorFlow's own assign_add, one locked op on the variable's
    device: Keras 3's Variable.assign_add is assign(self + value), a read and a write, so
    parameter-server workers updating at the same time lost increments (2 workers, 200
    steps: 159), and the learning-rate schedule and Adam's bias correction, which follow
    that count, fell behind the global step (the rate at the last step 18x its floor)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        counter = self._iterations
        counter.assign_add = lambda value: variables.underlying(counter).assign_add(tf.cast(value, counter.dtype))

    def update_step(self, gradient, variable, learning_rate):
        def unwrapped(v):  # a Keras variable -> its tf.Variable (tf.Variable.value is a method)
            return v.value if isinstance(v, keras.Variable) else v

        tf_variable = unwrapped(variable)
        index = self._get_variable_index(variable)
        slots = [unwrapped(self._momentums[index]), unwrapped(self._velocities[index])]
        if (self.amsgrad or isinstance(gradient, tf.IndexedSlices)
                or not all(isinstance(t, tf.Variable) and hasattr(t, "handle") for t in (tf_variable, *slots))):
            return super().update_step(gradient, variable, learning_rate)
        dtype = tf_variable.dtype
        step = tf.cast(self.iterations + 1, dtype)
        beta_1, beta_2 = tf.cast(self.beta_1, dtype), tf.cast(self.beta_2, dtype)
        return tf.raw_ops.ResourceApplyAdam(
            var=tf_variable.handle, m=slots[0].handle, v=slots[1].handle,
            beta1_power=tf.pow(beta_1, step), beta2_power=tf.pow(beta_2, step), lr=tf.cast(learning_rate, dtype),
            beta1=beta_1, beta2=beta_2, epsilon=tf.cast(self.epsilon, dtype), grad=tf.cast(gradient, dtype))


def build_optimizer(model: keras.Model, learning_rate) -> keras.optimizers.Optimizer:
    """Adam (FusedAdam) built on the model's TensorFlow variables. Call inside
    strategy.scope(): the slots are then created now, next to their variables (on the ps
    tasks under PS). `learning_rate`: a float or a schedule (see learning_rate())."""
    optimizer = FusedAdam(learning_rate, name="adam")
    optimizer.build(variables.sources(model))
    return optimizer


def global_step() -> tf.Variable:
    """The global step: finished steps, counted as make_train_fn describes."""
    return tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step")


class WorkerLines:
    """`Train [worker/N] step S: loss L, accuracy A (E s) R steps/s` from each parameter-server
    worker, in its own log, every `every` of its own steps (S counts the steps that worker
    ran since it started; the chief's Train lines count the global step).

    Under ParameterServerStrategy the train function runs on the workers, so its tf.print
    prints there; N is the worker's index (`experimental_get_current_worker_index`, a
    per-call value), and the counts, sums and times live in per-worker variables (one
    copy on each worker, never sent to the ps)."""

    def __init__(self, strategy: tf.distribute.Strategy, every: int, names: tuple[str, ...]):
        self.every, self.names = every, names
        with strategy.scope():
            self.steps = tf.Variable(0, dtype=tf.int64, trainable=False, per_worker_variable=True)
            self.since = tf.Variable(0, dtype=tf.int64, trainable=False, per_worker_variable=True)
            self.sums = tf.Variable(tf.zeros([2 + len(names)]), trainable=False, per_worker_variable=True)
            self.began = tf.Variable(0.0, dtype=tf.float64, trainable=False, per_worker_variable=True)
            self.mark = tf.Variable(0.0, dtype=tf.float64, trainable=False, per_worker_variable=True)

    def start(self) -> tuple[tf.Tensor, tf.Tensor]:
        """At the start of a call: (when the worker's first call began, when its last line
        was printed); the clock starts with the first call. Returned rather than read again
        later: automatic control dependencies do not order per-worker variables."""
        now, began, mark = tf.timestamp(), self.began.read_value(), self.mark.read_value()
        fresh = tf.equal(began, 0.0)
        began, mark = tf.where(fresh, now, began), tf.where(fresh, now, mark)
        self.began.assign(began)
        return began, mark

    def add(self, n: tf.Tensor, sums: tf.Tensor, began: tf.Tensor, mark: tf.Tensor) -> None:
        """After a call of `n` steps with these sums (loss, accuracy, the metrics): print
        a line when the worker's step count crossed a multiple of `every`. No variable is
        read inside a conditional (a per-worker variable is only substituted outside)."""
        n = tf.cast(n, tf.int64)
        before = self.steps.read_value()
        after, since = before + n, self.since.read_value() + n
        with tf.control_dependencies([sums]):  # after the steps ran
            now = tf.timestamp()
        total = self.sums.read_value() + sums
        crossed = after // self.every > before // self.every
        worker = tf.distribute.coordinator.experimental_get_current_worker_index()

        def report():
            means = total / tf.cast(since, tf.float32)
            parts = [tf.constant("Train [worker/"), tf.strings.as_string(worker), "] step ",
                     tf.strings.as_string(after), ": loss ", tf.strings.as_string(means[0], precision=4),
                     ", accuracy ", tf.strings.as_string(means[1], precision=4)]
            for index, name in enumerate(self.names):
                parts += [f", {name} ", tf.strings.as_string(means[2 + index], precision=4)]
            rate = tf.cast(since, tf.float64) / tf.maximum(now - mark, 1e-9)
            parts += [" (", tf.strings.as_string(now - began, precision=1), " s) ",
                      tf.strings.as_string(rate, precision=2), " steps/s"]
            return tf.print(tf.strings.join(parts), output_stream=sys.stdout)

        tf.cond(crossed, report, tf.no_op)
        self.steps.assign(after)
        self.since.assign(tf.where(crossed, tf.zeros_like(since), since))
        self.sums.assign(tf.where(crossed, tf.zeros_like(total), total))
        self.mark.assign(tf.where(crossed, now, mark))


def make_train_fn(strategy: tf.distribute.Strategy, state, count_steps: bool = True,
                  worker_lines: int = 0, stop_vote: bool = False):
    """`state`: a session.Session (model, optimizer, step) made under `strategy`.

    count_steps: the call adds `n` to the global step (MultiWorkerMirrored and single
    process: every call runs exactly once). Under parameter-server training pass False:
    ClusterCoordinator runs a call again when its worker is lost, also after the call had
    updated the variables, so the coordinator counts the calls it got results for instead
    (session.run); the global step then equals --train-steps exactly.
    worker_lines: under parameter-server training, each worker prints its own Train line
    every that many of its steps (WorkerLines); 0: none.
    stop_vote: the call takes a third argument, 1.0 when this process was asked to stop
    (SIGTERM), and returns last how many replicas asked, summed across the workers with
    the step's own all-reduce: under MultiWorkerMirrored every worker then learns of a
    peer's SIGTERM at the same call, so all save the same step together."""
    model, optimizer, step = state.model, state.optimizer, state.step
    spec = models.get(state.args.model)
    loss_and_hits, names = spec.loss_and_hits, getattr(spec, "TRAIN_METRICS", ())
    sources = variables.sources(model)
    lines = WorkerLines(strategy, worker_lines, names) if worker_lines else None

    def replica_step(inputs, labels):
        with tf.GradientTape() as tape:
            losses, hits, logits = loss_and_hits(model, inputs, labels, training=True)
            loss = tf.nn.compute_average_loss(losses)  # / global batch under MWMS
        grads = tape.gradient(loss, sources)
        optimizer.apply_gradients(zip(grads, sources))
        extra = tf.stack(spec.batch_metrics(labels, logits)) if names else tf.zeros([0])
        return loss, tf.reduce_mean(hits), extra

    def steps(iterator, n, stop=None):
        loss_sum = tf.constant(0.0)
        accuracy_sum = tf.constant(0.0)
        extra_sum = tf.zeros([len(names)])
        if lines is not None:
            began, mark = lines.start()
            with tf.control_dependencies([began, mark]):  # the clock is read before the steps run
                n = tf.identity(n)
        for _ in tf.range(n):
            inputs, labels = next(iterator)
            loss, accuracy, extra = strategy.run(replica_step, args=(inputs, labels))
            loss_sum += strategy.reduce(tf.distribute.ReduceOp.SUM, loss, axis=None)
            accuracy_sum += strategy.reduce(tf.distribute.ReduceOp.MEAN, accuracy, axis=None)
            extra_sum += strategy.reduce(tf.distribute.ReduceOp.MEAN, extra, axis=None)
        if count_steps:
            step.assign_add(tf.cast(n, tf.int64))
        if lines is not None:
            lines.add(n, tf.concat([[loss_sum, accuracy_sum], extra_sum], axis=0), began, mark)
        count = tf.cast(n, tf.float32)
        means = (loss_sum / count, accuracy_sum / count, *tf.unstack(extra_sum / count, num=len(names)))
        if stop is not None:
            votes = strategy.run(tf.identity, args=(tf.convert_to_tensor(stop, tf.float32),))
            return (*means, strategy.reduce(tf.distribute.ReduceOp.SUM, votes, axis=None))
        return means

    # Two functions, not one with `stop` optional: ClusterCoordinator.schedule calls the
    # concrete function traced for its args, which binds no Python default, so an optional
    # third parameter fails every parameter-server call ("missing a required argument").
    @tf.function
    def train(iterator, n):
        return steps(iterator, n)

    @tf.function
    def train_voting(iterator, n, stop):
        return steps(iterator, n, stop)

    return train_voting if stop_vote else train
