"""What `--mode=sample` feeds a generator: slerp, interpolation rows, truncation and the noise
of a seed."""

import math

import numpy as np
import pytest
import tensorflow as tf

from trainers.setups import draws


def test_slerp_endpoints_are_the_inputs():
    a, b = np.array([3.0, 0.0, 4.0]), np.array([0.0, 2.0, 0.0])
    path = draws.slerp(a, b, [0.0, 1.0])
    np.testing.assert_allclose(path, [a, b], atol=1e-12)


def test_slerp_midpoint_of_orthogonal_unit_vectors():
    path = draws.slerp(np.array([1.0, 0.0]), np.array([0.0, 1.0]), [0.5, 1 / 3])
    np.testing.assert_allclose(path[0], [math.sqrt(0.5), math.sqrt(0.5)], atol=1e-12)
    np.testing.assert_allclose(path[1], [math.cos(math.pi / 6), math.sin(math.pi / 6)], atol=1e-12)


def test_slerp_keeps_the_norm_of_equal_norm_vectors_and_batches():
    rng = np.random.default_rng(0)
    a = rng.normal(size=(3, 16))
    b = rng.normal(size=(3, 16))
    b *= (np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1))[:, None]
    path = draws.slerp(a, b, np.linspace(0, 1, 9))
    assert path.shape == (3, 9, 16)
    np.testing.assert_allclose(np.linalg.norm(path, axis=-1),
                               np.repeat(np.linalg.norm(a, axis=1)[:, None], 9, axis=1), rtol=1e-12)
    lerp_mid = np.linalg.norm((a + b) / 2, axis=1)
    assert (lerp_mid < np.linalg.norm(path[:, 4], axis=1)).all()


def test_slerp_of_parallel_vectors_falls_back_to_a_line():
    path = draws.slerp(np.array([1.0, 1.0]), np.array([2.0, 2.0]), [0.25])
    np.testing.assert_allclose(path, [[1.25, 1.25]])
    with pytest.raises(ValueError, match="slerp needs"):
        draws.slerp(np.zeros(3), np.zeros(4), [0.5])


def test_interpolation_noise_rows_walk_between_pairs():
    endpoints = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 2.0], [2.0, 0.0]], np.float32)
    noise = draws.interpolation_noise(endpoints, 3)
    assert noise.shape == (6, 2) and noise.dtype == np.float32
    np.testing.assert_allclose(noise[[0, 2, 3, 5]], endpoints, atol=1e-7)
    np.testing.assert_allclose(noise[1], [math.sqrt(0.5)] * 2, atol=1e-7)
    np.testing.assert_allclose(noise[4], [math.sqrt(2.0)] * 2, atol=1e-6)


def test_truncation_redraws_only_values_beyond_psi():
    noise = draws.sample_noise(0, 256, (32,))
    truncated = draws.truncate_noise(noise, psi=0.7, seed=0).numpy()
    inside = np.abs(noise.numpy()) <= 0.7
    assert 0.3 < inside.mean() < 0.7
    np.testing.assert_array_equal(truncated[inside], noise.numpy()[inside])
    assert np.abs(truncated).max() <= 0.7
    assert len(np.unique(truncated[~inside])) == (~inside).sum()
    np.testing.assert_array_equal(truncated, draws.truncate_noise(noise, psi=0.7, seed=0))
    with pytest.raises(ValueError, match="psi > 0"):
        draws.truncate_noise(noise, psi=0.0, seed=0)


def test_sample_noise_rows_do_not_depend_on_the_count():
    many = draws.sample_noise(4, 64, (8,)).numpy()
    few = draws.sample_noise(tf.constant(4, tf.int64), tf.constant(5), (8,)).numpy()
    np.testing.assert_array_equal(many[:5], few)
    np.testing.assert_array_equal(
        few, tf.random.stateless_normal([5, 8], seed=[4, draws.SAMPLE_NOISE_SALT]).numpy())
