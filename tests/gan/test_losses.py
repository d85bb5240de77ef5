import math

import numpy as np
import pytest
import tensorflow as tf

from gan import losses

LOG2 = math.log(2.0)
REAL = np.array([0.0, 2.0, -1.0], dtype=np.float32)
FAKE = np.array([0.0, -3.0, 0.5], dtype=np.float32)


def _softplus(x):
    return np.log1p(np.exp(np.asarray(x, dtype=np.float64)))


def _discriminator_expected(name):
    r, f = REAL.astype(np.float64), FAKE.astype(np.float64)
    return {
        "minimax": _softplus(-r) + _softplus(f),
        "non_saturating": _softplus(-r) + _softplus(f),
        "wasserstein": f - r,
        "hinge": np.maximum(0.0, 1.0 - r) + np.maximum(0.0, 1.0 + f),
        "least_squares": 0.5 * ((r - 1.0) ** 2 + f**2),
        "relativistic": _softplus(-(r - f)),
    }[name]


def _generator_expected(name):
    r, f = REAL.astype(np.float64), FAKE.astype(np.float64)
    return {
        "minimax": -_softplus(f),
        "non_saturating": _softplus(-f),
        "wasserstein": -f,
        "hinge": -f,
        "least_squares": 0.5 * (f - 1.0) ** 2,
        "relativistic": _softplus(-(f - r)),
    }[name]


def _generator(pair, fake, real):
    """The generator half on `fake`, paired with `real` when the loss pairs reals."""
    return pair.generator(fake, real) if pair.pairs_real else pair.generator(fake)


def test_registry_has_exactly_the_documented_losses():
    assert set(losses.LOSSES) == {
        "minimax",
        "non_saturating",
        "wasserstein",
        "hinge",
        "least_squares",
        "relativistic",
    }
    assert [name for name, loss in losses.LOSSES.items() if loss.pairs_real] == ["relativistic"]


@pytest.mark.parametrize("name", sorted(losses.LOSSES))
def test_discriminator_loss_matches_closed_form(name):
    got = losses.get_loss(name).discriminator(tf.constant(REAL), tf.constant(FAKE))
    np.testing.assert_allclose(got.numpy(), _discriminator_expected(name), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", sorted(losses.LOSSES))
def test_generator_loss_matches_closed_form(name):
    got = _generator(losses.get_loss(name), tf.constant(FAKE), tf.constant(REAL))
    np.testing.assert_allclose(got.numpy(), _generator_expected(name), rtol=1e-6, atol=1e-6)


def test_hand_computed_values_at_zero_logits():
    zeros = tf.zeros((2,))
    np.testing.assert_allclose(
        losses.non_saturating_discriminator_loss(zeros, zeros).numpy(), [2 * LOG2] * 2, rtol=1e-6
    )
    np.testing.assert_allclose(losses.minimax_generator_loss(zeros).numpy(), [-LOG2] * 2, rtol=1e-6)
    np.testing.assert_allclose(losses.non_saturating_generator_loss(zeros).numpy(), [LOG2] * 2)
    np.testing.assert_allclose(losses.hinge_discriminator_loss(zeros, zeros).numpy(), [2.0, 2.0])
    np.testing.assert_allclose(
        losses.least_squares_discriminator_loss(zeros, zeros).numpy(), [0.5, 0.5]
    )
    np.testing.assert_allclose(losses.least_squares_generator_loss(zeros).numpy(), [0.5, 0.5])


def test_hinge_is_zero_beyond_the_margin():
    got = losses.hinge_discriminator_loss(tf.constant([1.5, 1.0]), tf.constant([-2.0, -1.0]))
    np.testing.assert_array_equal(got.numpy(), [0.0, 0.0])


def test_minimax_and_non_saturating_share_the_discriminator_but_not_the_generator():
    fake = tf.constant([-5.0])
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(fake)
        saturating = losses.minimax_generator_loss(fake)
        non_saturating = losses.non_saturating_generator_loss(fake)
    # d/df -softplus(f) = -sigmoid(f); d/df softplus(-f) = -sigmoid(-f).
    sigmoid = 1.0 / (1.0 + math.exp(5.0))
    np.testing.assert_allclose(tape.gradient(saturating, fake).numpy(), [-sigmoid], rtol=1e-5)
    np.testing.assert_allclose(
        tape.gradient(non_saturating, fake).numpy(), [-(1.0 - sigmoid)], rtol=1e-5
    )


@pytest.mark.parametrize("name", sorted(losses.LOSSES))
def test_stable_and_exact_at_large_logits(name):
    real = tf.constant([100.0, -100.0])
    fake = tf.constant([-100.0, 100.0])
    pair = losses.get_loss(name)
    d_loss = pair.discriminator(real, fake).numpy()
    g_loss = _generator(pair, fake, real).numpy()
    assert np.all(np.isfinite(d_loss)) and np.all(np.isfinite(g_loss))
    if name in ("minimax", "non_saturating"):
        # softplus(-100) underflows to ~0, softplus(100) = 100 exactly in float32.
        np.testing.assert_allclose(d_loss, [0.0, 200.0], atol=1e-6)


@pytest.mark.parametrize("name", sorted(losses.LOSSES))
def test_column_logits_give_per_example_losses(name):
    pair = losses.get_loss(name)
    real = tf.constant(REAL[:, None])
    fake = tf.constant(FAKE[:, None])
    d_loss = pair.discriminator(real, fake)
    g_loss = _generator(pair, fake, real)
    assert d_loss.shape == (3,) and g_loss.shape == (3,)
    np.testing.assert_allclose(d_loss.numpy(), _discriminator_expected(name), rtol=1e-6, atol=1e-6)


def test_non_batch_axes_are_averaged_per_example():
    fake = tf.constant([[0.0, 2.0], [4.0, 4.0]])
    np.testing.assert_allclose(losses.wasserstein_generator_loss(fake).numpy(), [-1.0, -4.0])


@pytest.mark.parametrize("dtype", [tf.float16, tf.bfloat16])
@pytest.mark.parametrize("name", sorted(losses.LOSSES))
def test_half_precision_inputs_give_float32_outputs(name, dtype):
    pair = losses.get_loss(name)
    real = tf.constant(REAL, dtype=dtype)
    fake = tf.constant(FAKE, dtype=dtype)
    assert pair.discriminator(real, fake).dtype == tf.float32
    assert _generator(pair, fake, real).dtype == tf.float32


def test_float16_logits_beyond_exp_range_stay_finite():
    # exp(20) overflows float16 (max ~65504); the float32 cast keeps softplus exact.
    got = losses.non_saturating_generator_loss(tf.constant([-20.0], dtype=tf.float16))
    np.testing.assert_allclose(got.numpy(), [20.0], rtol=1e-6)


def test_unknown_loss_names_the_flag_and_the_choices():
    with pytest.raises(ValueError) as error:
        losses.get_loss("vanilla")
    message = str(error.value)
    assert "--loss" in message and "'vanilla'" in message
    for name in losses.LOSSES:
        assert name in message


def test_registry_is_read_only():
    with pytest.raises(TypeError):
        losses.LOSSES["mine"] = losses.LOSSES["hinge"]


def test_top_k_weights_keep_the_fakes_the_discriminator_scores_highest():
    logits = tf.constant([0.1, 3.0, -1.0, 2.0])
    weights = losses.top_k_weights(logits, 0.5).numpy()
    np.testing.assert_array_equal(weights, [0.0, 2.0, 0.0, 2.0])
    per_example = losses.non_saturating_generator_loss(logits)
    kept_mean = float(tf.reduce_mean(tf.gather(per_example, [1, 3])))
    assert float(tf.reduce_mean(per_example * weights)) == pytest.approx(kept_mean, rel=1e-6)


def test_top_k_weights_at_the_ends_and_on_ties():
    logits = tf.constant([1.0, 5.0, 5.0, 2.0, 0.0])
    np.testing.assert_array_equal(losses.top_k_weights(logits, 1.0).numpy(), np.ones(5))
    # at least one fake is kept; of two equal scores the earlier one
    np.testing.assert_array_equal(losses.top_k_weights(logits, 0.01).numpy(), [0, 5, 0, 0, 0])
    # round(0.7 x 10) = 7, not 8 (0.7 x 10 is 7.0000005 in float32)
    assert int(np.count_nonzero(losses.top_k_weights(tf.range(10.0), 0.7).numpy())) == 7


def test_top_k_weights_rank_patch_logits_by_their_mean():
    patches = tf.constant([[[1.0], [1.0]], [[4.0], [-4.0]], [[0.5], [2.0]]])  # means 1, 0, 1.25
    np.testing.assert_allclose(losses.top_k_weights(patches, 2 / 3).numpy(), [1.5, 0.0, 1.5])


def test_top_k_weights_compile_with_xla():
    logits = tf.random.stateless_normal([16, 2, 2, 1], seed=[3, 4])
    compiled = tf.function(losses.top_k_weights, jit_compile=True)
    for fraction in (0.25, 0.5, 1.0):  # one compiled function, a moving fraction
        np.testing.assert_array_equal(compiled(logits, tf.constant(fraction)).numpy(),
                                      losses.top_k_weights(logits, fraction).numpy())
    assert compiled.experimental_get_tracing_count() == 1


def test_relativistic_losses_pair_example_i_with_example_i_and_read_only_the_difference():
    real, fake = tf.constant([[3.0], [-1.0]]), tf.constant([[1.0], [-1.0]])
    np.testing.assert_allclose(losses.relativistic_discriminator_loss(real, fake).numpy(),
                               [math.log1p(math.exp(-2.0)), LOG2], rtol=1e-6)
    np.testing.assert_allclose(losses.relativistic_generator_loss(fake, real).numpy(),
                               [math.log1p(math.exp(2.0)), LOG2], rtol=1e-6)
    shifted = losses.relativistic_discriminator_loss(real + 7.0, fake + 7.0)
    np.testing.assert_allclose(shifted.numpy(),
                               losses.relativistic_discriminator_loss(real, fake).numpy(), rtol=1e-6)


def test_relativistic_losses_are_finite_for_huge_gaps():
    real, fake = tf.constant([500.0, -500.0]), tf.constant([-500.0, 500.0])
    np.testing.assert_allclose(losses.relativistic_discriminator_loss(real, fake).numpy(), [0.0, 1000.0])
    np.testing.assert_allclose(losses.relativistic_generator_loss(fake, real).numpy(), [1000.0, 0.0])
