"""The update step's metric names and its replica-context condition."""

import keras
import tensorflow as tf

from trainers.engine.distribution import make_strategy
from trainers.engine.phases import Phase
from trainers.engine.steps import replica_cond, reported_metrics


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
