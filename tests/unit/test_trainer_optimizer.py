"""trainer.train.step.FusedAdam: Keras 3's Adam with TensorFlow's fused ResourceApplyAdam
for dense gradients, against Keras's own Adam on the same variables and gradients."""
from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from trainer.train.step import FusedAdam


def twins(shape=(50, 7), learning_rate=3e-3):
    init = np.random.default_rng(0).normal(size=shape).astype("float32")
    ours, theirs = tf.Variable(init), tf.Variable(init)
    fused, plain = FusedAdam(learning_rate, name="adam"), keras.optimizers.Adam(learning_rate)
    fused.build([ours])
    plain.build([theirs])
    return (fused, ours), (plain, theirs)


def test_dense_updates_are_keras_adams_in_one_fused_op():
    (fused, ours), (plain, theirs) = twins()
    rng = np.random.default_rng(1)
    for _ in range(30):
        grad = tf.constant(rng.normal(size=(50, 7)).astype("float32"))
        fused.apply_gradients([(grad, ours)])
        plain.apply_gradients([(grad, theirs)])
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=0, atol=1e-5)
    for mine, keras_slot in zip(fused.variables, plain.variables):  # iterations, lr, momentum, velocity
        assert mine.path == keras_slot.path  # the same slots, so checkpoints restore either way
        # the kernel forms 1 - beta_2 in float32 (Keras in Python floats): 1e-5 apart, relatively
        np.testing.assert_allclose(np.asarray(mine.numpy()), np.asarray(keras_slot.numpy()), rtol=1e-4, atol=1e-7)

    @tf.function
    def apply():
        fused.apply_gradients([(tf.ones([50, 7]), ours)])

    ops = [node.op for node in apply.get_concrete_function().graph.as_graph_def().node]
    assert ops.count("ResourceApplyAdam") == 1


def test_sparse_gradients_take_keras_update():
    (fused, ours), (plain, theirs) = twins()
    grad = tf.IndexedSlices(tf.ones([2, 7]), tf.constant([3, 9]), tf.constant([50, 7]))
    fused.apply_gradients([(grad, ours)])
    plain.apply_gradients([(grad, theirs)])
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    untouched = [i for i in range(50) if i not in (3, 9)]
    np.testing.assert_array_equal(ours.numpy()[untouched], twins()[0][1].numpy()[untouched])


def test_the_step_count_goes_up_in_one_locked_op_not_a_read_and_a_write():
    """Keras 3's Variable.assign_add is assign(self + value): parameter-server workers
    updating at once lost increments, and the learning-rate schedule lagged
    (tests/integration/test_trainer_ps.py sees it in TensorBoard's learning rate)."""
    (fused, ours), _ = twins()

    @tf.function
    def apply():
        fused.apply_gradients([(tf.ones([50, 7]), ours)])

    graph = apply.get_concrete_function().graph.as_graph_def()
    counter = [node for node in graph.node if node.op in ("AssignAddVariableOp", "AssignVariableOp")
               and node.attr["dtype"].type == tf.int64.as_datatype_enum]
    assert [node.op for node in counter] == ["AssignAddVariableOp"]
    apply()
    apply()
    assert int(fused.iterations.numpy()) == 2
