"""`--mode=sample`: draws samples from the latest generator checkpoint in `--logdir`.

The model is rebuilt from the run's own `config.json`, so only `--logdir`, `--num_samples`,
`--output` and `--seed` matter here; no training flag has to be repeated.
"""

from __future__ import annotations

import dataclasses
import json
import os

import tensorflow as tf

from datasets import registry
from trainers import images, presets
from trainers.config import Config, ConfigError
from trainers.training import CHECKPOINT_SUBDIR

SAMPLE_NOISE_SALT = 104729


def load_run_config(logdir: str) -> Config:
    """The config a run was trained with, read from LOGDIR/config.json."""
    path = os.path.join(logdir, "config.json")
    if not os.path.exists(path):
        raise ConfigError(
            f"--logdir={logdir!r} holds no training run ({path} is missing); train first with "
            f"`python run.py --logdir={logdir}` or point --logdir at an existing run.")
    with open(path) as file:
        stored = json.load(file)
    known = {f.name for f in dataclasses.fields(Config)}
    return Config(**{k: v for k, v in stored.items() if k in known})


def sample(config: Config) -> str:
    """Writes `config.num_samples` samples to `config.output`; returns the checkpoint used."""
    run = dataclasses.replace(load_run_config(config.logdir), use_ema=config.use_ema)
    directory = os.path.join(config.logdir, CHECKPOINT_SUBDIR)
    latest = tf.train.latest_checkpoint(directory)
    if latest is None:
        raise ConfigError(
            f"--logdir={config.logdir!r} has no checkpoint in {directory}; train until the first "
            "checkpoint is written (--checkpoint_every) and sample again.")
    info = registry.dataset_info(run.dataset, resolution=run.resolution)
    setup = presets.build_setup(run, info, tf.distribute.get_strategy())
    # Restores every model (the EMA generator too, when the run keeps one); `sample` picks it.
    tf.train.Checkpoint(models=dict(setup.models)).restore(latest).expect_partial()
    noise = tf.random.stateless_normal(
        [config.num_samples, *setup.latent_shape], seed=[config.seed, SAMPLE_NOISE_SALT])
    outputs = setup.sample(noise).numpy()
    if info.kind == "points":
        images.save_points(outputs, config.output, modes=info.modes)
    else:
        images.save_samples(outputs, config.output)
    return latest
