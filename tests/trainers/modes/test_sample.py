"""`--mode=sample` of an unconditional run: its grid and interpolation files, truncated noise,
and the layouts a 2-D toy run refuses."""

import dataclasses

import matplotlib.image
import numpy as np
import pytest

from tests.trainers.synthetic_run import write_run
from trainers.config.flags import ConfigError
from trainers.modes import sample
from trainers.outputs import images
from trainers.setups import draws


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    return write_run(tmp_path_factory.mktemp("sampling") / "run")


def test_grid_png_has_rows_and_columns(synthetic, tmp_path):
    config = dataclasses.replace(synthetic.config, grid="2x5", output=str(tmp_path / "g.png"))
    assert sample.sample(config).count == 10
    assert matplotlib.image.imread(tmp_path / "g.png").shape[:2] == (2 * 28 + 3, 5 * 28 + 6)


def test_interpolation_rows_start_and_end_at_the_sampled_noise(synthetic, tmp_path):
    config = dataclasses.replace(synthetic.config, interpolate=4, num_samples=3, seed=9,
                                 output=str(tmp_path / "i.npy"))
    assert sample.sample(config).count == 12
    rows = np.load(tmp_path / "i.npy").reshape(3, 4, 28, 28, 1)
    plain = dataclasses.replace(config, interpolate=0, num_samples=6, output=str(tmp_path / "p.npy"))
    sample.sample(plain)
    ends = np.load(tmp_path / "p.npy").reshape(3, 2, 28, 28, 1)
    assert np.abs(rows[:, [0, -1]].astype(int) - ends.astype(int)).max() <= 1
    assert np.abs(rows[:, 1].astype(int) - rows[:, 0]).mean() > 1
    png = dataclasses.replace(config, output=str(tmp_path / "i.png"))
    sample.sample(png)
    assert matplotlib.image.imread(tmp_path / "i.png").shape[:2] == (3 * 28 + 4, 4 * 28 + 5)


def test_truncated_samples_use_the_truncated_noise(synthetic, tmp_path):
    config = dataclasses.replace(synthetic.config, truncation=0.5, num_samples=4,
                                 output=str(tmp_path / "t.npy"))
    sample.sample(config)
    noise = draws.truncate_noise(draws.sample_noise(config.seed, 4, (8,)), psi=0.5, seed=config.seed)
    expected = images.to_uint8(synthetic.models["generator_ema"](noise, training=False).numpy())
    assert np.abs(np.load(tmp_path / "t.npy").astype(int) - expected).max() <= 1


def test_grid_is_refused_for_a_toy_run(tmp_path):
    run = write_run(tmp_path / "ring", dataset="ring8", ema=False, latent_dim=4)
    config = dataclasses.replace(run.config, grid="2x2", output=str(tmp_path / "p.png"))
    with pytest.raises(ConfigError, match="--grid='2x2' lays out images.*2-D toy run"):
        sample.sample(config)
    assert not (tmp_path / "p.png").exists()
