import keras
import numpy as np
import pytest
import tensorflow as tf

from trainers.engine import ema


def test_beta_from_half_life_in_images():
    beta = float(ema.ema_beta(batch_size=64, halflife_kimg=10, images_seen=1e9))
    assert beta == pytest.approx(0.5 ** (64 / 10_000))
    # after one half-life worth of updates the old weights count one half
    assert beta ** (10_000 / 64) == pytest.approx(0.5, rel=1e-5)


def test_rampup_caps_the_half_life_early_in_training():
    early = float(ema.ema_beta(batch_size=64, halflife_kimg=10, images_seen=640, rampup=0.05))
    assert early == pytest.approx(0.5 ** (64 / 32))
    late = float(ema.ema_beta(batch_size=64, halflife_kimg=10, images_seen=1e7, rampup=0.05))
    assert late == pytest.approx(0.5 ** (64 / 10_000))


def test_ema_requires_a_positive_half_life():
    with pytest.raises(ValueError, match="--ema_halflife_kimg=0"):
        ema.ema_beta(batch_size=1, halflife_kimg=0, images_seen=1)


def _model():
    inputs = keras.Input((2,))
    return keras.Model(inputs, keras.layers.BatchNormalization()(keras.layers.Dense(2)(inputs)))


def test_update_ema_interpolates_weights_and_copies_statistics():
    model, average = _model(), _model()
    for variable in model.trainable_variables:
        variable.assign(tf.ones_like(variable) * 3.0)
    for variable in average.trainable_variables:
        variable.assign(tf.ones_like(variable))
    model.non_trainable_variables[0].assign([7.0, 8.0])
    ema.update_ema(average, model, 0.25)
    for variable in average.trainable_variables:
        np.testing.assert_allclose(variable.numpy(), 3.0 + (1.0 - 3.0) * 0.25)
    np.testing.assert_array_equal(average.non_trainable_variables[0].numpy(), [7.0, 8.0])


def test_a_tensor_half_life_of_zero_makes_the_average_the_model():
    assert float(ema.ema_beta(batch_size=8, halflife_kimg=tf.constant(0.0), images_seen=8)) == 0.0
    assert float(ema.ema_beta(batch_size=1000, halflife_kimg=tf.constant(1.0), images_seen=8)) == \
        pytest.approx(0.5)
