"""The update step's metric names, its replica-context condition, and the pieces of one
update: the routing of variables to optimizers and losses, clipping and the finiteness check."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from trainers.engine.distribution import make_strategy
from trainers.engine.phases import Phase
from trainers.engine.steps import (clip_and_measure, losses_finite, replica_cond, reported_metrics,
                                   update_layout)


def _loss(models, inputs):
    raise AssertionError("naming metrics never calls the loss")


def test_reported_metrics_put_the_declared_metrics_after_the_loss():
    phase = Phase(name="p", models=("a", "b"), optimizers=("x", "y"), loss=_loss,
                  metrics=("score",), per_model_losses=True)
    plain = {"x": keras.optimizers.SGD(0.1), "y": keras.optimizers.SGD(0.1), "other": None}
    assert reported_metrics(phase, plain) == (
        "loss", "score", "loss_a", "loss_b", "grad_norm_x", "grad_norm_y", "learning_rate_x",
        "learning_rate_y", "nonfinite")
    scaled = {**plain, "y": keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(0.1))}
    assert reported_metrics(phase, scaled)[-2:] == ("nonfinite", "loss_scale_y")
    one = Phase(name="d", models=("d",), loss=_loss, metrics=("real_score", "fake_score"))
    assert reported_metrics(one, {"d": keras.optimizers.SGD(0.1)}) == (
        "loss", "real_score", "fake_score", "grad_norm", "learning_rate", "nonfinite")


def test_replica_cond_runs_on_every_replica_with_its_own_arguments():
    strategy = make_strategy("mirrored", cpu_replicas=2)
    with strategy.scope():
        total = tf.Variable(0.0, aggregation=tf.VariableAggregation.SUM)

    @tf.function
    def add_if(condition):
        def replica_fn():
            context = tf.distribute.get_replica_context()
            mine = tf.cast(context.replica_id_in_sync_group, tf.float32) + 1.0  # 1 and 2
            replica_cond(condition, total.assign_add, mine)

        strategy.run(replica_fn)

    add_if(tf.constant(True))
    assert float(total.numpy()) == 1.0 + 2.0  # each replica added its own value
    add_if(tf.constant(False))
    assert float(total.numpy()) == 3.0


def linear(name: str, units: int = 1) -> keras.Model:
    inputs = keras.Input((2,))
    return keras.Model(inputs, keras.layers.Dense(units, name=f"{name}_dense")(inputs), name=name)


def test_update_layout_routes_each_variable_to_its_optimizer_and_loss():
    models = {"a": linear("a"), "b": linear("b")}
    optimizers = {"x": keras.optimizers.SGD(0.1), "y": keras.optimizers.SGD(0.1)}
    phase = Phase(name="p", models=("a", "b"), optimizers=("x", "y"), loss=_loss,
                  per_model_losses=True)
    layout = update_layout(phase, models=models, optimizers=optimizers, global_batch_size=4,
                           num_replicas=2)
    # each Dense holds a kernel and a bias
    assert layout.owners == [("x", "a"), ("x", "a"), ("y", "b"), ("y", "b")]
    assert layout.targets == [("x", "a"), ("y", "b")]
    assert layout.members == {"x": [0, 1], "y": [2, 3]}
    assert (layout.replica_batch_size, layout.microbatches, layout.scaling) == (
        2, 1, {"x": False, "y": False})
    with pytest.raises(ValueError, match=r"uses optimizers \['y'\]"):
        update_layout(phase, models=models, optimizers={"x": optimizers["x"]}, global_batch_size=4,
                      num_replicas=2)
    with pytest.raises(ValueError, match="Global batch 5 is not divisible by 2 replicas"):
        update_layout(phase, models=models, optimizers=optimizers, global_batch_size=5,
                      num_replicas=2)


def test_clip_and_measure_clips_to_the_phase_norm_and_reports_the_norm_before_clipping():
    models = {"a": linear("a")}
    phase = Phase(name="p", models=("a",), loss=_loss, clip_norm=1.0)
    layout = update_layout(phase, models=models, optimizers={"p": keras.optimizers.SGD(0.1)},
                           global_batch_size=2, num_replicas=1)
    gradients = [tf.constant([[3.0], [0.0]]), tf.constant([4.0])]
    clipped, finite, metrics = clip_and_measure(layout, "p", gradients, tf.constant(True))
    np.testing.assert_allclose(clipped[0].numpy(), [[0.6], [0.0]], rtol=1e-6)
    np.testing.assert_allclose(clipped[1].numpy(), [0.8], rtol=1e-6)
    assert bool(finite) and set(metrics) == {"grad_norm", "learning_rate"}
    assert float(metrics["grad_norm"]) == pytest.approx(5.0)
    assert float(metrics["learning_rate"]) == pytest.approx(0.1)
    _, finite, _ = clip_and_measure(layout, "p", [gradients[0], tf.constant([np.inf])],
                                    tf.constant(True))
    assert not bool(finite)


def test_losses_finite_needs_the_loss_and_every_per_model_loss_finite():
    assert bool(losses_finite(tf.constant(1.0), {"a": tf.constant(2.0)}))
    assert not bool(losses_finite(tf.constant(1.0), {"a": tf.constant(np.nan)}))
    assert not bool(losses_finite(tf.constant(np.inf), {}))
