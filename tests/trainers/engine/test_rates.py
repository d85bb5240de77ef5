"""Per-variable learning rates: a variable with factor f moves exactly as under a plain Keras
optimizer at f times the (scheduled) rate, for Adam and RMSprop, whose steps a gradient scale
would not change; names, first-match rules and freezing."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from trainers.engine import rates, schedules

GRADIENT_SEEDS = {"slow/kernel": 1, "slow/bias": 2, "fast/kernel": 3, "fast/bias": 4}


def two_layers(name="net") -> keras.Model:
    inputs = keras.Input((3,))
    outputs = keras.layers.Dense(4, name="fast")(keras.layers.Dense(3, name="slow")(inputs))
    model = keras.Model(inputs, outputs, name=name)
    for variable in model.trainable_variables:
        variable.assign(tf.random.stateless_uniform(variable.shape, seed=[1, variable.shape[0]]))
    return model


def rate(base):
    return schedules.PhaseLearningRate(base=base, kind="linear", total=5, warmup=2)


def apply(optimizer, variables):
    """Three updates with fixed gradients: a variable's depend only on its path and the step."""
    optimizer.build(variables)
    for step in range(3):
        optimizer.apply([tf.random.stateless_normal(v.shape, seed=[step, GRADIENT_SEEDS[v.path]])
                         for v in variables], variables)


@pytest.mark.parametrize("kind", ["adam", "rmsprop"])
def test_a_factor_is_a_plain_optimizer_at_that_multiple_of_the_scheduled_rate(kind):
    factored_class, plain = {"adam": (rates.Adam, keras.optimizers.Adam),
                             "rmsprop": (rates.RMSprop, keras.optimizers.RMSprop)}[kind]
    model, fast, slow = two_layers(), two_layers(), two_layers()
    factors = rates.RateFactors((("net/fast", 2.0), ("net/slow/kernel", 0.5)))
    apply(factored_class(rate(1e-2), factor_of=factors.lookup({"net": model})), model.trainable_variables)
    apply(plain(rate(2e-2)), fast.get_layer("fast").trainable_variables)
    slow_kernel, slow_bias = slow.get_layer("slow").trainable_variables
    apply(plain(rate(0.5e-2)), [slow_kernel])
    apply(plain(rate(1e-2)), [slow_bias])
    expected = [slow_kernel, slow_bias, *fast.get_layer("fast").trainable_variables]
    for got, want in zip(model.trainable_variables, expected, strict=True):
        np.testing.assert_array_equal(got.numpy(), want.numpy(), err_msg=got.path)
    moved = two_layers()
    assert all(np.abs(a.numpy() - b.numpy()).min() > 0
               for a, b in zip(model.trainable_variables, moved.trainable_variables))


def test_the_first_matching_rule_decides_and_names_carry_the_model():
    model = two_layers("generator")
    names = [rates.variable_name("generator", v) for v in model.trainable_variables]
    assert names == ["generator/slow/kernel", "generator/slow/bias",
                     "generator/fast/kernel", "generator/fast/bias"]
    factors = rates.RateFactors((("kernel$", 0.0), ("slow", 3.0), ("nothing", 2.0)))
    assert [factors.factor(n) for n in names] == [0.0, 3.0, 0.0, 1.0]
    assert factors.unmatched(names) == ["nothing"]
    rates.freeze(factors, {"generator": model})
    assert [v.path for v in model.trainable_variables] == ["slow/bias", "fast/bias"]
