"""Tiny setups on synthetic data, shared by the trainer tests."""

import dataclasses

import tensorflow as tf

from datasets import registry as datasets
import trainers.api  # noqa: F401  declares every flag, in order, before a Config is made
from trainers.config.flags import Config
from trainers.engine.distribution import make_strategy
from trainers.engine.state import TrainingState
from trainers.engine.trainer import Trainer
from trainers.setups import building, registry
from trainers.setups.protocol import Built

IMAGE_INFO = datasets.dataset_info("fashion_mnist")  # 28x28x1 images; no data is read
EXAMPLES = 96


def tiny_config(**overrides) -> Config:
    # float32 on every CPU: the default --precision=auto would train in bfloat16 where it is
    # native, and these tests compare numbers across runs, replicas and exports.
    base = Config(batch_size=8, g_width=4, d_width=4, latent_dim=8, seed=3, precision="float32")
    return registry.resolve(dataclasses.replace(base, **overrides))


def synthetic_dataset_fn(strategy, config):
    """Shuffled, repeated synthetic images whose position can be restored with skip."""
    images = tf.random.stateless_uniform([EXAMPLES, 28, 28, 1], seed=[4, 2]) * 2 - 1
    labels = tf.range(EXAMPLES, dtype=tf.int64)

    def make(global_batches_done):
        def input_fn(context):
            per_replica = context.get_per_replica_batch_size(config.batch_size)
            dataset = tf.data.Dataset.from_tensor_slices({"x": images, "label": labels})
            dataset = dataset.shuffle(EXAMPLES, seed=config.seed).repeat()
            dataset = dataset.batch(per_replica, drop_remainder=True)
            return dataset.skip(global_batches_done * context.num_replicas_in_sync)
        return strategy.distribute_datasets_from_function(input_fn)

    return make


def build(config: Config, *, replicas: int = 1, phase_names=None) -> Trainer:
    return build_run(config, replicas=replicas, phase_names=phase_names)[1]


def build_run(config: Config, *, replicas: int = 1, phase_names=None, info=IMAGE_INFO,
              dataset_fn=None) -> tuple[Built, Trainer]:
    """(built run, trainer) of `config.setup` on `info`'s shapes, fed by
    `dataset_fn(strategy, config)` (default: synthetic images), optionally restricted to the
    phases named in `phase_names`."""
    strategy = make_strategy("mirrored" if replicas > 1 else "default", cpu_replicas=replicas)
    tf.keras.utils.set_random_seed(config.seed)
    built = building.build_run(registry.get(config.setup), config, info, strategy)
    state = TrainingState.create(models=built.models, optimizers=built.optimizers,
                                 learning_rate_scales=built.learning_rate_scales,
                                 loss_weights=built.loss_weights)
    phases = [p for p in built.phases if phase_names is None or p.name in phase_names]
    trainer = Trainer(strategy=strategy, state=state, phases=phases,
                      make_dataset=(dataset_fn or synthetic_dataset_fn)(strategy, config),
                      global_batch_size=config.batch_size, seed=config.seed)
    return built, trainer
