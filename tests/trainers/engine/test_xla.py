"""`jit_compile=True`: each update's loss and gradients run as one XLA computation, and the
trainer ends with the variables the uncompiled trainer reaches."""

import dataclasses

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.trainers.tiny import IMAGE_INFO, synthetic_dataset_fn, tiny_config
from datasets import registry as datasets
from trainers.config.flags import ConfigError
from trainers.engine import phases
from trainers.engine.distribution import make_strategy
from trainers.engine.state import TrainingState
from trainers.engine.trainer import Trainer
from trainers.modes import train
from trainers.setups import building, registry

POINTS_INFO = datasets.dataset_info("ring8")


def ramp_normal(self, shape, *, salt=0):
    """A stand-in for `StepInputs.normal` that XLA and TensorFlow compute identically.

    Their stateless random kernels differ (the same key draws different numbers), so the real
    noise would make the two runs diverge for a reason unrelated to the compiled update. This
    still varies with the update's seed, hence with the cycle and the phase.
    """
    size = self.global_batch_size * int(np.prod(shape))
    ramp = tf.reshape(tf.range(size, dtype=tf.float32), [self.global_batch_size, *shape])
    offset = tf.cast(tf.reduce_sum(self.seed % 1000) + salt, tf.float32)
    return self._rows(tf.sin(0.37 * ramp + offset))


def points_dataset_fn(strategy, config):
    points = tf.random.stateless_normal([64, 2], seed=[5, 1])

    def make(global_batches_done):
        def input_fn(context):
            dataset = tf.data.Dataset.from_tensor_slices(
                {"x": points, "label": tf.zeros([64], tf.int64)}).repeat()
            dataset = dataset.batch(context.get_per_replica_batch_size(config.batch_size),
                                    drop_remainder=True)
            return dataset.skip(global_batches_done * context.num_replicas_in_sync)
        return strategy.distribute_datasets_from_function(input_fn)

    return make


def build(*, jit_compile, info=IMAGE_INFO, dataset_fn=synthetic_dataset_fn, replicas=1):
    """The tiny dcgan setup (or the MLP pair for points) with plain SGD: its update is linear
    in the gradient, so a numerical difference in the gradient shows up as one in the weights
    (Adam's first steps are nearly sign(gradient) and would hide it)."""
    config = tiny_config()
    strategy = make_strategy("mirrored" if replicas > 1 else "default", cpu_replicas=replicas)
    keras.utils.set_random_seed(config.seed)
    built = building.build_run(registry.get(config.setup), config, info, strategy)
    optimizers = {}
    with strategy.scope():
        for phase in built.phases:
            optimizers[phase.name] = keras.optimizers.SGD(0.05)
            optimizers[phase.name].build(
                [v for name in phase.models for v in built.models[name].trainable_variables])
    state = TrainingState.create(models=built.models, optimizers=optimizers)
    return Trainer(strategy=strategy, state=state, phases=built.phases,
                   make_dataset=dataset_fn(strategy, config), global_batch_size=config.batch_size,
                   seed=config.seed, jit_compile=jit_compile)


def xla_calls(trainer) -> int:
    """Calls of functions marked for XLA compilation inside the trainer's loop body."""
    loop = trainer._loop.get_concrete_function(
        trainer._iterator, tf.constant(1, tf.int64), tf.constant(False))
    body = next(op for op in loop.graph.get_operations() if op.type == "While")._body_graph
    return sum(1 for op in body.get_operations()
               if op.type in ("PartitionedCall", "StatefulPartitionedCall")
               and op.node_def.attr["_XlaMustCompile"].b)


def variables(trainer):
    return {f"{name}/{v.path}": v.numpy() for name, model in trainer.state.models.items()
            for v in model.variables}


def assert_same_training(plain, compiled, cycles):
    initial = variables(plain)
    plain_metrics, compiled_metrics = plain.train(cycles).metrics, compiled.train(cycles).metrics
    plain_after, compiled_after = variables(plain), variables(compiled)
    moved = max(float(np.max(np.abs(plain_after[k] - initial[k]))) for k in initial)
    assert moved > 1e-3  # the comparison below is far tighter than the updates themselves
    for key in plain_after:
        np.testing.assert_allclose(compiled_after[key], plain_after[key], rtol=1e-5, atol=1e-6,
                                   err_msg=key)
    assert compiled_metrics.keys() == plain_metrics.keys()
    for key, value in plain_metrics.items():
        assert compiled_metrics[key] == pytest.approx(value, rel=1e-4, abs=1e-5), key


def test_compiled_updates_give_the_same_variables(monkeypatch):
    monkeypatch.setattr(phases.StepInputs, "normal", ramp_normal)
    plain, compiled = build(jit_compile=False), build(jit_compile=True)
    assert_same_training(plain, compiled, cycles=3)
    assert xla_calls(compiled) == 2 and xla_calls(plain) == 0  # one per phase update
    assert compiled.traces == 1


def test_compiled_updates_with_two_replicas_give_the_same_variables(monkeypatch):
    # The MLP pair has no synchronized batch norm, so each replica's update compiles.
    monkeypatch.setattr(phases.StepInputs, "normal", ramp_normal)
    plain, compiled = (build(jit_compile=jit, info=POINTS_INFO, dataset_fn=points_dataset_fn,
                             replicas=2) for jit in (False, True))
    assert_same_training(plain, compiled, cycles=3)
    assert xla_calls(compiled) == 4  # one per phase update and replica


def test_image_gan_with_several_replicas_and_xla_is_rejected_before_writing(tmp_path):
    config = dataclasses.replace(tiny_config(), jit_compile=True, strategy="mirrored",
                                 cpu_replicas=2, logdir=str(tmp_path / "run"))
    with pytest.raises(ConfigError, match="synchronized batch norm"):
        train.build(config)
    assert not (tmp_path / "run").exists()
