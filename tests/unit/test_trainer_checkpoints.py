"""trainer.checkpoints and trainer.variables on plain models."""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from trainer import checkpoints, models, train_step, variables


def test_restart_restores_weights_optimizer_and_step(tmp_path):
    model = models.build("mnist")
    optimizer = train_step.build_optimizer(model, 1e-3)
    step = train_step.global_step()
    step.assign(120)
    model.weights[0].assign(tf.ones_like(model.weights[0]))
    saver = checkpoints.Checkpointer(str(tmp_path), checkpoints.checkpoint(model, optimizer, step))
    assert saver.restore() is None
    path = saver.save(120)
    assert path.endswith("/checkpoints/ckpt-120") and checkpoints.step_of(path) == 120

    again = models.build("mnist")
    step_again = train_step.global_step()
    restored = checkpoints.Checkpointer(
        str(tmp_path), checkpoints.checkpoint(again, train_step.build_optimizer(again, 1e-3), step_again)).restore()
    assert restored == path and int(step_again.numpy()) == 120
    np.testing.assert_array_equal(again.weights[0].numpy(), np.ones(again.weights[0].shape))


def test_non_writer_saves_elsewhere(tmp_path):
    model = models.build("mnist")
    saver = checkpoints.Checkpointer(str(tmp_path), checkpoints.checkpoint(model), writer=False)
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
