"""`--mode=sample`: draws samples from a checkpoint of the run in `--logdir`.

What a sample is (images from noise, a class grid, a scatter plot of points, translations of
test images) is the run's setup's to say (`Setup.sample`); the layout flags (`--grid`,
`--interpolate`, `--truncation`, `--label`, `--direction`) are read there.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from datasets import files
from trainers.config.flags import Config, ConfigError
from trainers.modes import restore
from trainers.setups import registry
from trainers.setups.protocol import Restored

if TYPE_CHECKING:
    import keras


class Sampled(NamedTuple):
    """What `sample` wrote: the checkpoint used and the number of samples in the file."""

    checkpoint: str
    count: int


def restored_run(config: Config, precision: str | None = None) -> Restored:
    """The run in `config.logdir` at its `--checkpoint` (latest, best or a step)."""
    return restore.restore(config.logdir, use_ema=config.use_ema, precision=precision,
                           checkpoint=restore.chosen_checkpoint(config.logdir, config.checkpoint))


def sample(config: Config) -> Sampled:
    """Writes `config.output` from the `--checkpoint` (latest, best or a step) of `config.logdir`."""
    restored = restored_run(config)
    count = registry.get(restored.run.setup).sample(config, restored)
    return Sampled(checkpoint=restored.checkpoint, count=count)


def sample_array(config: Config, *, write: bool) -> np.ndarray:
    """The samples `sample(config)` draws, as its .npy output holds them (uint8 NHWC images,
    float32 points, a setup's translations), written to `config.output` too when `write`.
    They go through that file, so the array is what `--mode=sample` gives, whatever the setup.
    A .npy output is that file, drawn once; a .png is its own layout (a grid, CycleGAN's three
    rows of inputs, translations and cycles), drawn after the array."""
    restored = restored_run(config)
    setup = registry.get(restored.run.setup)
    if write and config.output.endswith(".npy"):
        setup.sample(config, restored)
        with files.open_file(config.output, "rb") as handle:
            return np.load(handle)
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "samples.npy")
        setup.sample(dataclasses.replace(config, output=path), restored)
        samples = np.load(path)
    if write:
        setup.sample(config, restored)
    return samples


def sampling_model(config: Config) -> keras.Model:
    """The model `--mode=sample` draws with from the `--checkpoint` of `config.logdir` (the EMA
    generator when the run keeps one and --use_ema), rebuilt in float32; ConfigError for a
    setup without one."""
    restored = restored_run(config, precision="float32")
    if restored.built.sampling is None:
        raise ConfigError(f"--setup={restored.run.setup} runs draw nothing from noise, so they have "
                          "no generator to load; load their models from the checkpoint instead.")
    return restored.built.models[restored.built.sampling.model]
