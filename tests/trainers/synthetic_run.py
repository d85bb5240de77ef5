"""A run directory written in-process (config.json plus one checkpoint), without training.

Sampling and export tests need a LOGDIR that looks like a finished run; building the models and
saving their (reshaped) initial weights takes a second, where `run.py` takes ten.
"""

import dataclasses
import os

import tensorflow as tf

import trainers.api  # noqa: F401  declares every flag, in order, before a Config is made
from trainers.config.flags import Config
from trainers.config.record import CHECKPOINT_SUBDIR
from trainers.modes.train import write_config_once
from trainers.setups import building, registry

STEP = 7


@dataclasses.dataclass(frozen=True)
class SyntheticRun:
    config: Config
    models: dict  # the models as saved, for reference outputs


def write_run(logdir, *, dataset: str = "fashion_mnist", ema: bool = True,
              distinct_classes: bool = False, **overrides) -> SyntheticRun:
    """Writes LOGDIR/config.json and LOGDIR/checkpoints/ckpt-7 (step 7).

    The output layer of every generator is scaled up so image pixels use the whole 0..255
    range (fresh weights give grey images, which would make pixel comparisons toothless), and
    the EMA generator differs from the raw one, so a test can tell which one was used.
    With `distinct_classes` the per-class offsets (beta) of conditional batch norms are random,
    so each class draws a different image (fresh ones are zero: every class looks the same).
    """
    config = registry.resolve(dataclasses.replace(
        Config(batch_size=8, g_width=4, d_width=4, latent_dim=8, seed=3, dataset=dataset,
               precision="float32",  # on every CPU (auto: bfloat16 where native)
               ema_halflife_kimg=1.0 if ema else 0.0, logdir=str(logdir)), **overrides))
    setup = registry.get(config.setup)
    info = setup.dataset_info(config)
    tf.keras.utils.set_random_seed(config.seed)
    built = building.build_run(setup, config, info, tf.distribute.get_strategy())
    for name, scale in (("generator", 20.0), ("generator_ema", -30.0)):
        if name in built.models:
            last = built.models[name].layers[-2 if info.kind == "image" else -1]
            last.kernel.assign(last.kernel * scale)
    if distinct_classes:
        for model in built.models.values():
            for layer in model.layers:
                if type(layer).__name__ == "ConditionalBatchNorm":
                    layer.beta.assign(tf.random.normal(layer.beta.shape))
    step = tf.Variable(STEP, dtype=tf.int64)
    checkpoint = tf.train.Checkpoint(step=step, models=dict(built.models))
    tf.train.CheckpointManager(checkpoint, os.path.join(str(logdir), CHECKPOINT_SUBDIR),
                               max_to_keep=1).save(checkpoint_number=STEP)
    write_config_once(config)
    return SyntheticRun(config=config, models=dict(built.models))
