"""trainer.checkpoints and trainer.variables on plain models."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from trainer import checkpoints, models, variables
from trainer.train import step as train_step


def trained(name: str = "mnist", steps: int = 2):
    """A model, its Adam (slots non-zero after `steps` updates) and a global step."""
    model = models.build(name)
    optimizer = train_step.build_optimizer(model, 1e-3)
    sources = variables.sources(model)
    images = tf.random.stateless_uniform([4, 28, 28, 1], seed=[1, 2])
    labels = tf.constant([0, 1, 2, 3], tf.int64)
    for _ in range(steps):
        with tf.GradientTape() as tape:
            logits = model(images, training=False)
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
        optimizer.apply_gradients(zip(tape.gradient(loss, sources), sources))
    step = train_step.global_step()
    step.assign(120)
    return model, optimizer, step


def fresh(name: str = "mnist"):
    model = models.build(name)
    return model, train_step.build_optimizer(model, 1e-3), train_step.global_step()


def values(parts: dict) -> dict[str, np.ndarray]:
    return {checkpoints.readable(key): tf.convert_to_tensor(v).numpy() for key, v in checkpoints.entries(parts).items()}


def test_restart_restores_weights_optimizer_slots_and_step(tmp_path):
    saved = checkpoints.groups(*trained())
    saver = checkpoints.Checkpointer(str(tmp_path), saved, "mnist")
    assert saver.restore() is None
    path = saver.save(120)
    assert path.endswith("/checkpoints/ckpt-120") and checkpoints.step_of(path) == 120

    again = checkpoints.groups(*fresh())
    assert checkpoints.Checkpointer(str(tmp_path), again, "mnist").restore() == path
    before, after = values(saved), values(again)
    assert before.keys() == after.keys()
    for name in ("optimizer/mnist.dense.kernel.momentum", "optimizer/mnist.dense.kernel.velocity",
                 "optimizer/iteration", "model/mnist.dense.kernel"):
        assert np.any(before[name]), name  # trained state, not the zeros of a fresh optimizer
    for name, value in before.items():
        np.testing.assert_array_equal(after[name], value, err_msg=name)
    assert int(after["step"]) == 120 and int(after["optimizer/iteration"]) == 2


def test_keys_name_each_weight_and_slot_independently_of_the_ps_layout():
    keys = [checkpoints.readable(k) for k in checkpoints.entries(checkpoints.groups(*fresh()))]
    assert "model/mnist.conv1.kernel" in keys and "step" in keys
    assert {"optimizer/mnist.conv1.kernel.momentum", "optimizer/mnist.conv1.kernel.velocity",
            "optimizer/iteration"} <= set(keys)
    assert not [k for k in keys if "_0_" in k or "part_" in k]  # no TF variable or shard names


def test_checkpoint_of_another_model_is_refused_with_one_line(tmp_path):
    checkpoints.Checkpointer(str(tmp_path), checkpoints.groups(*trained("mnist")), "mnist").save(300)
    other = checkpoints.groups(*fresh("mnist-cloudml"))
    with pytest.raises(checkpoints.MismatchError) as error:
        checkpoints.Checkpointer(str(tmp_path), other, "mnist-cloudml").restore()
    message = str(error.value)
    assert "\n" not in message
    assert message.startswith(f"--job-dir {tmp_path}: checkpoint ckpt-300 does not match --model mnist-cloudml")
    assert "it lacks model/mnist_cloudml.conv1.bias" in message and "model/mnist.conv1.bias" in message
    # the evaluator checks the weights only; the same refusal
    model_only = {"model": variables.named(models.build("mnist-cloudml").weights)}
    assert checkpoints.mismatch(f"{tmp_path}/checkpoints/ckpt-300", model_only)
    assert checkpoints.mismatch(f"{tmp_path}/checkpoints/ckpt-300",
                                {"model": variables.named(models.build("mnist").weights)}) is None


def test_checkpoint_with_optimizer_state_this_job_cannot_place_is_refused(tmp_path):
    model, optimizer, step = trained()
    old_layout = {"model": variables.named(model.weights), "optimizer": variables.named(optimizer.variables),
                  "step": step}  # slots keyed by TF variable names, as before ps-independent keys
    tf.train.Checkpoint(**old_layout).write(f"{tmp_path}/checkpoints/ckpt-50")
    problem = checkpoints.mismatch(f"{tmp_path}/checkpoints/ckpt-50", checkpoints.groups(*fresh()))
    assert "it lacks optimizer/iteration, optimizer/learning_rate, optimizer/mnist.conv1.bias.momentum" in problem
    assert "_conv1_bias_0_momentum and 15 more that this job does not have" in problem


def test_checkpoint_whose_variable_has_another_shape_is_refused_with_one_line(tmp_path):
    """The same variable names with another shape (a model whose layer sizes changed):
    the one line naming the variable and both shapes, not TensorFlow's restore error."""
    model, optimizer, step = fresh()
    written = checkpoints.groups(model, optimizer, step)
    written["model"] = {**written["model"], "mnist.dense.bias": tf.Variable(tf.zeros([7]))}
    tf.train.CheckpointManager(tf.train.Checkpoint(**written), f"{tmp_path}/checkpoints", 1).save(50)
    with pytest.raises(checkpoints.MismatchError) as error:
        checkpoints.Checkpointer(str(tmp_path), checkpoints.groups(*fresh()), "mnist").restore()
    message = str(error.value)
    assert "\n" not in message and message.startswith(f"--job-dir {tmp_path}: checkpoint ckpt-50 does not match")
    expected = list(variables.named(models.build("mnist").weights)["mnist.dense.bias"].shape)
    assert f"shapes differ: model/mnist.dense.bias [7] (expected {expected})" in message


def test_non_writer_saves_elsewhere(tmp_path):
    saver = checkpoints.Checkpointer(str(tmp_path), {"model": variables.named(models.build("mnist").weights)},
                                     "mnist", writer=False)
    saver.save(5)
    assert not (tmp_path / "checkpoints").exists()


def test_checkpoint_keys_are_stable_variable_paths():
    names = list(variables.named(models.build("mnist").weights))
    assert names == list(variables.named(models.build("mnist").weights))  # a second copy: same keys
    assert names[:2] == ["mnist.conv1.kernel", "mnist.conv1.bias"]


def test_copy_and_placement_of_a_plain_model():
    source, target = models.build("mnist"), models.build("mnist")
    variables.copy(source, target)
    for a, b in zip(source.weights, target.weights, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    lines = variables.placement(source)
    assert len(lines) == 8 and lines[4].startswith("Variable mnist/dense/kernel (3136, 256) on ")


def test_only_the_savers_own_retracing_warning_is_dropped():
    import logging

    checkpoints.quiet_saver_retracing()
    checkpoints.quiet_saver_retracing()  # once
    logger = logging.getLogger("tensorflow")
    assert sum(isinstance(known, checkpoints._SaverRetracing) for known in logger.filters) == 1
    seen = []

    class Keep(logging.Handler):
        def emit(self, record):
            seen.append(record.getMessage())

    handler = Keep()
    logger.addHandler(handler)
    try:
        for function in ("MultiDeviceSaver.save.<locals>.tf_function_save", "train_step"):
            logger.warning("{} out of the last {} calls to <function {} at 0x7f> triggered tf.function "
                           "retracing.".format(5, 5, function))
    finally:
        logger.removeHandler(handler)
    assert seen == ["5 out of the last 5 calls to <function train_step at 0x7f> triggered tf.function retracing."]


def test_checkpoints_are_numbered_by_step_and_the_newest_five_kept(tmp_path):
    saver = checkpoints.Checkpointer(str(tmp_path), {"model": variables.named(models.build("mnist").weights)}, "mnist")
    for step in range(10, 80, 10):
        saver.save(step)
    kept = sorted(int(path.name[len("ckpt-"):-len(".index")]) for path in (tmp_path / "checkpoints").glob("*.index"))
    assert kept == [30, 40, 50, 60, 70]
    assert checkpoints.step_of(saver.restore()) == 70  # a restart resumes from the newest
