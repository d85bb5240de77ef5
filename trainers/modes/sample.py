"""`--mode=sample`: draws samples from a checkpoint of the run in `--logdir`.

What a sample is (images from noise, a class grid, a scatter plot of points, translations of
test images) is the run's setup's to say (`Setup.sample`); the layout flags (`--grid`,
`--interpolate`, `--truncation`, `--label`, `--direction`) are read there.
"""

from __future__ import annotations

from typing import NamedTuple

from trainers.config.fields import Config
from trainers.modes import restore
from trainers.setups import registry


class Sampled(NamedTuple):
    """What `sample` wrote: the checkpoint used and the number of samples in the file."""

    checkpoint: str
    count: int


def sample(config: Config) -> Sampled:
    """Writes `config.output` from the `--checkpoint` (latest, best or a step) of `config.logdir`."""
    restored = restore.restore(config.logdir, use_ema=config.use_ema,
                               checkpoint=restore.chosen_checkpoint(config.logdir, config.checkpoint))
    count = registry.get(restored.run.setup).sample(config, restored)
    return Sampled(checkpoint=restored.checkpoint, count=count)
