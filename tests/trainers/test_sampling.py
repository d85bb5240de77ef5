"""`--mode=sample` helpers (slerp, truncation, noise, --grid) and its grid and interpolation files."""

import dataclasses
import math

import matplotlib.image
import numpy as np
import pytest
import tensorflow as tf

from tests.trainers.synthetic_run import write_run
from trainers import sampling
from trainers.outputs import images
from trainers.config.fields import Config, ConfigError
from trainers.config.presets import resolve_preset
from trainers.config.validation import parse_grid, validate


def test_slerp_endpoints_are_the_inputs():
    a, b = np.array([3.0, 0.0, 4.0]), np.array([0.0, 2.0, 0.0])
    path = sampling.slerp(a, b, [0.0, 1.0])
    np.testing.assert_allclose(path, [a, b], atol=1e-12)


def test_slerp_midpoint_of_orthogonal_unit_vectors():
    path = sampling.slerp(np.array([1.0, 0.0]), np.array([0.0, 1.0]), [0.5, 1 / 3])
    np.testing.assert_allclose(path[0], [math.sqrt(0.5), math.sqrt(0.5)], atol=1e-12)
    np.testing.assert_allclose(path[1], [math.cos(math.pi / 6), math.sin(math.pi / 6)], atol=1e-12)


def test_slerp_keeps_the_norm_of_equal_norm_vectors_and_batches():
    rng = np.random.default_rng(0)
    a = rng.normal(size=(3, 16))
    b = rng.normal(size=(3, 16))
    b *= (np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1))[:, None]
    path = sampling.slerp(a, b, np.linspace(0, 1, 9))
    assert path.shape == (3, 9, 16)
    np.testing.assert_allclose(np.linalg.norm(path, axis=-1),
                               np.repeat(np.linalg.norm(a, axis=1)[:, None], 9, axis=1), rtol=1e-12)
    lerp_mid = np.linalg.norm((a + b) / 2, axis=1)
    assert (lerp_mid < np.linalg.norm(path[:, 4], axis=1)).all()


def test_slerp_of_parallel_vectors_falls_back_to_a_line():
    path = sampling.slerp(np.array([1.0, 1.0]), np.array([2.0, 2.0]), [0.25])
    np.testing.assert_allclose(path, [[1.25, 1.25]])
    with pytest.raises(ValueError, match="slerp needs"):
        sampling.slerp(np.zeros(3), np.zeros(4), [0.5])


def test_interpolation_noise_rows_walk_between_pairs():
    endpoints = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 2.0], [2.0, 0.0]], np.float32)
    noise = sampling.interpolation_noise(endpoints, 3)
    assert noise.shape == (6, 2) and noise.dtype == np.float32
    np.testing.assert_allclose(noise[[0, 2, 3, 5]], endpoints, atol=1e-7)
    np.testing.assert_allclose(noise[1], [math.sqrt(0.5)] * 2, atol=1e-7)
    np.testing.assert_allclose(noise[4], [math.sqrt(2.0)] * 2, atol=1e-6)


def test_truncation_redraws_only_values_beyond_psi():
    noise = sampling.sample_noise(0, 256, (32,))
    truncated = sampling.truncate_noise(noise, psi=0.7, seed=0).numpy()
    inside = np.abs(noise.numpy()) <= 0.7
    assert 0.3 < inside.mean() < 0.7
    np.testing.assert_array_equal(truncated[inside], noise.numpy()[inside])
    assert np.abs(truncated).max() <= 0.7
    assert len(np.unique(truncated[~inside])) == (~inside).sum()
    np.testing.assert_array_equal(truncated, sampling.truncate_noise(noise, psi=0.7, seed=0))
    with pytest.raises(ValueError, match="psi > 0"):
        sampling.truncate_noise(noise, psi=0.0, seed=0)


def test_sample_noise_rows_do_not_depend_on_the_count():
    many = sampling.sample_noise(4, 64, (8,)).numpy()
    few = sampling.sample_noise(tf.constant(4, tf.int64), tf.constant(5), (8,)).numpy()
    np.testing.assert_array_equal(many[:5], few)
    np.testing.assert_array_equal(
        few, tf.random.stateless_normal([5, 8], seed=[4, sampling.SAMPLE_NOISE_SALT]).numpy())


def _validated(**fields):
    return validate(resolve_preset(Config(**fields)))


def test_grid_parsing_and_validation():
    assert parse_grid("") is None
    assert parse_grid("8x8") == (8, 8) and parse_grid("2x13") == (2, 13)
    for bad in ("8", "8x", "0x4", "3X4", "-1x2", "2x3x4", " 2x3"):
        with pytest.raises(ConfigError, match=f"--grid={bad!r}"):
            parse_grid(bad)
    assert _validated(grid="2x3", num_samples=6).grid == "2x3"
    with pytest.raises(ConfigError, match="--num_samples=10 .*draws 6 samples"):
        _validated(grid="2x3", num_samples=10)
    with pytest.raises(ConfigError, match="--grid='2x3' .*drop --grid"):
        _validated(grid="2x3", interpolate=5)
    with pytest.raises(ConfigError, match="--interpolate=1"):
        _validated(interpolate=1)
    with pytest.raises(ConfigError, match="--truncation=-0.5"):
        _validated(truncation=-0.5)


@pytest.mark.parametrize("fields, flag", [
    ({"export_format": "onnx"}, "--export_format='onnx'"),
    ({"quantize": "int4", "export_format": "tflite"}, "--quantize='int4'"),
    ({"quantize": "float16"}, "--quantize='float16'"),
    ({"export_name": "../up"}, "--export_name='../up'"),
    ({"export_name": ".hidden"}, "--export_name='.hidden'"),
    ({"export_version": -1}, "--export_version=-1"),
    ({"export_dir": ""}, "--export_dir=''"),
    ({"mode": "plot", "output": "curves.npy"}, "--output='curves.npy'"),
])
def test_export_and_plot_flags_are_validated(fields, flag):
    with pytest.raises(ConfigError, match=flag.replace(".", r"\.")):
        _validated(**fields)


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    return write_run(tmp_path_factory.mktemp("sampling") / "run")


def test_grid_png_has_rows_and_columns(synthetic, tmp_path):
    config = dataclasses.replace(synthetic.config, grid="2x5", output=str(tmp_path / "g.png"))
    assert sampling.sample(config).count == 10
    assert matplotlib.image.imread(tmp_path / "g.png").shape[:2] == (2 * 28 + 3, 5 * 28 + 6)


def test_interpolation_rows_start_and_end_at_the_sampled_noise(synthetic, tmp_path):
    config = dataclasses.replace(synthetic.config, interpolate=4, num_samples=3, seed=9,
                                 output=str(tmp_path / "i.npy"))
    assert sampling.sample(config).count == 12
    rows = np.load(tmp_path / "i.npy").reshape(3, 4, 28, 28, 1)
    plain = dataclasses.replace(config, interpolate=0, num_samples=6, output=str(tmp_path / "p.npy"))
    sampling.sample(plain)
    ends = np.load(tmp_path / "p.npy").reshape(3, 2, 28, 28, 1)
    assert np.abs(rows[:, [0, -1]].astype(int) - ends.astype(int)).max() <= 1
    assert np.abs(rows[:, 1].astype(int) - rows[:, 0]).mean() > 1
    png = dataclasses.replace(config, output=str(tmp_path / "i.png"))
    sampling.sample(png)
    assert matplotlib.image.imread(tmp_path / "i.png").shape[:2] == (3 * 28 + 4, 4 * 28 + 5)


def test_truncated_samples_use_the_truncated_noise(synthetic, tmp_path):
    config = dataclasses.replace(synthetic.config, truncation=0.5, num_samples=4,
                                 output=str(tmp_path / "t.npy"))
    sampling.sample(config)
    noise = sampling.truncate_noise(sampling.sample_noise(config.seed, 4, (8,)), psi=0.5,
                                    seed=config.seed)
    expected = images.to_uint8(synthetic.models["generator_ema"](noise, training=False).numpy())
    assert np.abs(np.load(tmp_path / "t.npy").astype(int) - expected).max() <= 1


def test_grid_is_refused_for_a_toy_run(tmp_path):
    run = write_run(tmp_path / "ring", dataset="ring8", ema=False, latent_dim=4)
    config = dataclasses.replace(run.config, grid="2x2", output=str(tmp_path / "p.png"))
    with pytest.raises(ConfigError, match="--grid='2x2' lays out images.*2-D toy run"):
        sampling.sample(config)
    assert not (tmp_path / "p.png").exists()
