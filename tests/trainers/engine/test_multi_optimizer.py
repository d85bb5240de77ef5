"""Phases that apply several optimizers: one per model, per-model losses, loss scaling, sharing
an optimizer with another phase, the all-or-nothing NaN guard and replica independence.

The models are y = w.x with w = (1, 1, 1) and every row x = (3, 0, 4) (so w.x = 7 and the
gradient of mean(c * w.x) is c * x, norm 5c): each update is computable by hand.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

from trainers.engine import phases as phases_lib
from trainers.engine.distribution import make_strategy
from trainers.engine.phases import LossOutput, Phase
from trainers.engine.state import TrainingState
from trainers.engine.steps import make_replica_update
from trainers.engine.trainer import Trainer

ROW = [3.0, 0.0, 4.0]


def linear(name: str) -> keras.Model:
    inputs = keras.Input((3,))
    model = keras.Model(inputs, keras.layers.Dense(1, use_bias=False)(inputs), name=name)
    model.trainable_variables[0].assign(tf.ones([3, 1]))
    return model


def sgd(rate: float, models, *, scale: float | None = None):
    optimizer = keras.optimizers.SGD(rate)
    if scale is not None:
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer, initial_scale=scale)
    optimizer.build([v for m in models for v in m.trainable_variables])
    return optimizer


def out(model, x):
    return tf.reshape(model(x), [-1])


def trainer_for(phases, models, optimizers, *, strategy=None, rows=None, batch=2) -> Trainer:
    strategy = strategy or make_strategy("default")
    rows = tf.constant([ROW] * batch if rows is None else rows)
    state = TrainingState.create(models=models, optimizers=optimizers)

    def make(done):
        def input_fn(context):
            per_replica = context.get_per_replica_batch_size(batch)
            data = tf.data.Dataset.from_tensor_slices(rows).repeat().batch(per_replica, drop_remainder=True)
            return data.skip(done * context.num_replicas_in_sync)
        return strategy.distribute_datasets_from_function(input_fn)

    return Trainer(strategy=strategy, state=state, phases=phases, make_dataset=make,
                   global_batch_size=batch, seed=0)


def weight(model) -> np.ndarray:
    return model.trainable_variables[0].numpy().ravel()


@pytest.mark.parametrize("clip_norm, step", [(0.0, [3.0, 0.0, 4.0]), (1.0, [0.6, 0.0, 0.8])])
def test_one_loss_two_optimizers_each_with_its_own_rate_and_clipping(clip_norm, step):
    a, b = linear("a"), linear("b")
    fast, slow = sgd(0.1, [a]), sgd(0.01, [b])
    phase = Phase(name="fit", models=("a", "b"), optimizers=("fast", "slow"), clip_norm=clip_norm,
                  loss=lambda models, inputs: LossOutput(
                      loss=inputs.mean(out(models["a"], inputs.real) + out(models["b"], inputs.real))))
    output = trainer_for((phase,), {"a": a, "b": b}, {"fast": fast, "slow": slow}).train(1)
    # each optimizer's gradient (3, 0, 4) is clipped on its own: to norm 1, not to a joint norm
    np.testing.assert_allclose(weight(a), 1.0 - 0.1 * np.array(step), rtol=1e-6)
    np.testing.assert_allclose(weight(b), 1.0 - 0.01 * np.array(step), rtol=1e-6)
    assert output.metrics == pytest.approx({
        "fit/loss": 14.0, "fit/grad_norm_fast": 5.0, "fit/grad_norm_slow": 5.0,
        "fit/learning_rate_fast": 0.1, "fit/learning_rate_slow": 0.01, "fit/nonfinite": 0.0})
    assert int(fast.iterations.numpy()) == int(slow.iterations.numpy()) == 1


def per_model_phase(scale: tf.Variable | None = None) -> Phase:
    """loss_a = mean(2 a + 5 b) (it also reaches b), loss_b = mean(b^2 / 2)."""

    def loss(models, inputs):
        a, b = out(models["a"], inputs.real), out(models["b"], inputs.real)
        loss_a = inputs.mean(2.0 * a + 5.0 * b)
        loss_b = inputs.mean(0.5 * b * b) * (1.0 if scale is None else scale)
        return LossOutput(loss=loss_a + loss_b, model_losses={"a": loss_a, "b": loss_b})

    return Phase(name="fit", models=("a", "b"), optimizers=("fast", "slow"), loss=loss,
                 per_model_losses=True)


@pytest.mark.parametrize("scales", [None, (1024.0, 16.0)])
def test_model_losses_differentiate_each_model_against_its_own_loss(scales):
    a, b = linear("a"), linear("b")
    fast = sgd(0.1, [a], scale=scales and scales[0])
    slow = sgd(0.01, [b], scale=scales and scales[1])
    output = trainer_for((per_model_phase(),), {"a": a, "b": b}, {"fast": fast, "slow": slow}).train(1)
    # d loss_a / d w_a = 2x = (6, 0, 8); d loss_b / d w_b = (w.x) x = 7x = (21, 0, 28): b's
    # update ignores the 5b term of loss_a, and each loss-scale optimizer unscales its own scale
    np.testing.assert_allclose(weight(a), [0.4, 1.0, 0.2], rtol=1e-6)
    np.testing.assert_allclose(weight(b), [0.79, 1.0, 0.72], rtol=1e-6)
    expected = {"fit/loss": 73.5, "fit/loss_a": 49.0, "fit/loss_b": 24.5,
                "fit/grad_norm_fast": 10.0, "fit/grad_norm_slow": 35.0,
                "fit/learning_rate_fast": 0.1, "fit/learning_rate_slow": 0.01, "fit/nonfinite": 0.0}
    if scales:
        expected |= {"fit/loss_scale_fast": 1024.0, "fit/loss_scale_slow": 16.0}
    assert output.metrics == pytest.approx(expected)


def test_a_non_finite_model_loss_skips_every_optimizer_of_the_update():
    a, b = linear("a"), linear("b")
    fast, slow = sgd(0.1, [a]), sgd(0.01, [b])
    scale = tf.Variable(float("nan"))
    trainer = trainer_for((per_model_phase(scale),), {"a": a, "b": b}, {"fast": fast, "slow": slow})
    assert trainer.train(1).metrics["fit/nonfinite"] == 1.0
    np.testing.assert_array_equal(weight(a), [1.0, 1.0, 1.0])
    assert int(fast.iterations.numpy()) == int(slow.iterations.numpy()) == 0
    scale.assign(1.0)
    assert trainer.train(1).metrics["fit/nonfinite"] == 0.0
    np.testing.assert_allclose(weight(a), [0.4, 1.0, 0.2], rtol=1e-6)
    assert trainer.traces == 1


def test_a_phase_shares_an_optimizer_with_another_phase():
    a, b = linear("a"), linear("b")
    shared, own = sgd(0.1, [a]), sgd(0.01, [b])
    first = Phase(name="first", models=("a",), optimizers=("shared",),
                  loss=lambda models, inputs: LossOutput(loss=inputs.mean(out(models["a"], inputs.real))))
    both = Phase(name="both", models=("a", "b"), optimizers=("shared", "own"), uses_data=False,
                 loss=lambda models, inputs: LossOutput(
                     loss=inputs.mean(out(models["a"], tf.constant([ROW] * 2))
                                      + out(models["b"], tf.constant([ROW] * 2)))))
    phases = (first, both)
    assert phases_lib.optimizer_models(phases) == {"shared": ("a",), "own": ("b",)}
    assert phases_lib.optimizer_updates_after(phases, 3) == {"shared": 6, "own": 3}
    output = trainer_for(phases, {"a": a, "b": b}, {"shared": shared, "own": own}).train(1)
    np.testing.assert_allclose(weight(a), [0.4, 1.0, 0.2], rtol=1e-6)  # two steps of 0.1 x
    np.testing.assert_allclose(weight(b), [0.97, 1.0, 0.96], rtol=1e-6)
    assert int(shared.iterations.numpy()) == 2 and int(own.iterations.numpy()) == 1
    assert {"first/grad_norm", "both/grad_norm_shared", "both/grad_norm_own"} <= set(output.metrics)
    assert "first/grad_norm_shared" not in output.metrics


def test_missing_optimizer_and_undeclared_model_losses_are_rejected():
    a, b = linear("a"), linear("b")
    optimizers = {"fast": sgd(0.1, [a])}
    with pytest.raises(ValueError, match=r"No optimizer named \['slow'\]"):
        trainer_for((per_model_phase(),), {"a": a, "b": b}, optimizers)
    with pytest.raises(ValueError, match=r"uses optimizers \['slow'\]"):
        make_replica_update(per_model_phase(), models={"a": a, "b": b}, optimizers=optimizers,
                            global_batch_size=2, num_replicas=1)
    optimizers["slow"] = sgd(0.01, [b])
    for declared in (False, True):
        phase = Phase(name="fit", models=("a", "b"), optimizers=("fast", "slow"),
                      per_model_losses=declared,
                      loss=lambda models, inputs, declared=declared: LossOutput(
                          loss=inputs.mean(out(models["a"], inputs.real) + out(models["b"], inputs.real)),
                          model_losses={} if declared else {"a": tf.constant(0.0)}))
        with pytest.raises(ValueError, match="one per model of"):
            trainer_for((phase,), {"a": a, "b": b}, optimizers).train(1)


def test_an_optimizer_whose_models_the_loss_ignores_is_rejected():
    a, b = linear("a"), linear("b")
    phase = Phase(name="fit", models=("a", "b"), optimizers=("fast", "slow"),
                  loss=lambda models, inputs: LossOutput(loss=inputs.mean(out(models["a"], inputs.real))))
    trainer = trainer_for((phase,), {"a": a, "b": b}, {"fast": sgd(0.1, [a]), "slow": sgd(0.1, [b])})
    with pytest.raises(ValueError, match=r"depends on none of the variables of \['b'\]"):
        trainer.train(1)


def test_two_replicas_match_one_replica_for_a_multi_optimizer_phase():
    rows = np.random.default_rng(0).normal(size=(8, 3)).astype(np.float32)

    def loss(models, inputs):
        a, b = out(models["a"], inputs.real), out(models["b"], inputs.real)
        noise = tf.reshape(inputs.normal([1]), [-1])
        loss_a = inputs.mean(tf.square(a - b) + a * noise)
        loss_b = inputs.mean(tf.square(b + 1.0) - a * b)
        return LossOutput(loss=loss_a + loss_b, metrics={"gap": inputs.mean(a - b)},
                          model_losses={"a": loss_a, "b": loss_b})

    phase = Phase(name="fit", models=("a", "b"), optimizers=("adam", "sgd"), loss=loss,
                  metrics=("gap",), per_model_losses=True, clip_norm=2.0)
    results = []
    for replicas in (1, 2):
        strategy = make_strategy("mirrored" if replicas > 1 else "default", cpu_replicas=replicas)
        with strategy.scope():
            a, b = linear("a"), linear("b")
            optimizers = {"adam": keras.optimizers.Adam(0.05), "sgd": sgd(0.1, [b])}
            optimizers["adam"].build(a.trainable_variables)
        trainer = trainer_for((phase,), {"a": a, "b": b}, optimizers, strategy=strategy,
                              rows=rows, batch=8)
        metrics = trainer.train(3).metrics
        results.append((weight(a), weight(b), metrics))
    (a1, b1, m1), (a2, b2, m2) = results
    assert not np.allclose(a1, 1.0) and not np.allclose(b1, 1.0)
    np.testing.assert_allclose(a2, a1, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(b2, b1, rtol=1e-5, atol=1e-6)
    assert m1.keys() == m2.keys() and m2 == pytest.approx(m1, rel=1e-5, abs=1e-6)


@pytest.mark.parametrize("replicas", [1, 2])
def test_sparse_gradients_of_an_embedding_update_only_the_rows_it_looked_up(replicas):
    strategy = make_strategy("mirrored" if replicas > 1 else "default", cpu_replicas=replicas)
    with strategy.scope():
        ids = keras.Input((), dtype="int32")
        table = keras.Model(ids, keras.layers.Embedding(4, 2, embeddings_initializer="ones")(ids),
                            name="table")
        optimizers = {"sgd": sgd(0.5, [table])}
    # loss = mean over the batch of sum(table[id]): each looked-up row's gradient is 1/2 per use
    phase = Phase(name="fit", models=("table",), optimizers=("sgd",),
                  loss=lambda models, inputs: LossOutput(
                      loss=inputs.mean(tf.reduce_sum(models["table"](inputs.real), axis=-1))))
    trainer = trainer_for((phase,), {"table": table}, optimizers, strategy=strategy,
                          rows=np.array([1, 3], np.int32), batch=2)

    trainer.train(1)

    np.testing.assert_allclose(table.trainable_variables[0].numpy(),
                               [[1.0, 1.0], [0.75, 0.75], [1.0, 1.0], [0.75, 0.75]])
