"""Presets and discriminator regularizers wired into phases: lsgan, sngan, r1 (lazy), DRAGAN,
R2, consistency regularization and DiffAugment, on tiny models and synthetic data."""

import dataclasses

import numpy as np
import pytest
import tensorflow as tf

from datasets import registry
from gan import losses
from tests.trainers.tiny import IMAGE_INFO, build, tiny_config
from trainers import adversarial, presets
from trainers.config.fields import ConfigError
from trainers.engine.phases import StepInputs


@pytest.mark.parametrize("gan", ["lsgan", "sngan", "r1"])
def test_new_presets_train_with_finite_metrics(gan):
    trainer = build(tiny_config(gan=gan))
    output = trainer.train(2)
    assert output.metrics and all(np.isfinite(v) for v in output.metrics.values())
    assert output.metrics["discriminator/nonfinite"] == 0.0


def test_sngan_generator_step_leaves_the_spectrally_normalized_discriminator_alone():
    trainer = build(tiny_config(gan="sngan"), phase_names={"generator"})
    discriminator = trainer.state.models["discriminator"]
    assert any("vector_u" in v.path for v in discriminator.non_trainable_variables)
    before = [v.numpy().copy() for v in discriminator.variables]
    trainer.train(2)
    assert all(np.array_equal(a, v.numpy()) for a, v in zip(before, discriminator.variables))


def test_lazy_r1_runs_every_nth_cycle_on_the_shared_discriminator_optimizer():
    trainer = build(tiny_config(gan="r1", penalty_every=2))
    optimizers = trainer.state.optimizers
    assert sorted(optimizers) == ["discriminator", "generator"]
    assert [phase.optimizers for phase in trainer.phases] == [(), ("discriminator",), ()]
    assert set(trainer.state.learning_rate_scales) == {"discriminator", "generator"}
    first = trainer.train(1)   # cycle 0: the penalty phase runs
    second = trainer.train(1)  # cycle 1: it does not
    trainer.train(2)
    assert int(optimizers["discriminator"].iterations.numpy()) == 4 + 2
    assert int(optimizers["generator"].iterations.numpy()) == 4
    # weight 5 x interval 2 on the reported (unweighted) R1 value
    assert first.metrics["penalty/loss"] == pytest.approx(10.0 * first.metrics["penalty/r1"], rel=1e-5)
    assert "penalty/loss" not in second.metrics
    assert "discriminator/r1" not in first.metrics


@pytest.mark.parametrize("penalty", ["dragan", "r1", "r2"])
def test_penalty_in_every_update_adds_its_weighted_value(penalty):
    trainer = build(tiny_config(penalty=penalty, penalty_weight=3.0))
    metrics = trainer.train(1).metrics
    assert metrics[f"discriminator/{penalty}"] >= 0
    assert metrics["discriminator/loss"] == pytest.approx(
        metrics["discriminator/adversarial"] + 3.0 * metrics[f"discriminator/{penalty}"], rel=1e-5)


def test_consistency_regularization_and_diffaugment():
    trainer = build(tiny_config(consistency_weight=10.0, diffaugment="color,translation,cutout"))
    metrics = trainer.train(2).metrics
    assert metrics["discriminator/consistency"] > 0
    assert metrics["discriminator/loss"] == pytest.approx(
        metrics["discriminator/adversarial"] + 10.0 * metrics["discriminator/consistency"], rel=1e-5)


def test_augmentation_changes_what_the_discriminator_sees():
    plain = build(tiny_config()).train(1).metrics
    augmented = build(tiny_config(diffaugment="translation,cutout")).train(1).metrics
    assert plain["discriminator/real_score"] != augmented["discriminator/real_score"]


def test_unknown_augmentation_is_a_config_error_before_building():
    with pytest.raises(ConfigError, match="--diffaugment"):
        presets.check_dataset(tiny_config(diffaugment="rotate"), IMAGE_INFO)


@pytest.mark.parametrize("flag, value", [("g_extra_blocks", 1), ("d_extra_blocks", 2),
                                         ("d_dropout", 0.3), ("g_upsample", "nearest")])
def test_image_network_flags_are_refused_for_toys_before_building(flag, value):
    config = tiny_config(dataset="ring8", **{flag: value})
    with pytest.raises(ConfigError, match=f"--{flag}={value!r}.*2-D points"):
        presets.check_dataset(config, registry.dataset_info("ring8"))


def test_top_k_generator_loss_is_the_replica_share_of_the_mean_over_the_kept_fakes():
    config = tiny_config(topk=0.5, topk_decay_steps=4)
    logits = tf.constant([0.3, -2.0, 1.5, 0.0, 4.0, -0.5, 2.5, -1.0])
    inputs = StepInputs(real=None, seed=tf.constant([0, 0], tf.int64), global_batch_size=16,
                        replica_batch_size=8, replica_index=0, cycle=tf.constant(2))
    loss = losses.get_loss(config.loss)

    share = adversarial.generator_adversarial_loss(config, loss, logits, inputs)

    # cycle 2 of 4: fraction 0.75, so the 6 highest of 8 logits; this replica holds half the batch
    kept = tf.gather(loss.generator(logits), [0, 2, 3, 4, 5, 6])
    assert float(share) == pytest.approx(float(tf.reduce_mean(kept)) / 2, rel=1e-6)
    everything = dataclasses.replace(config, topk=1.0)
    assert float(adversarial.generator_adversarial_loss(everything, loss, logits, inputs)) == pytest.approx(
        float(tf.reduce_mean(loss.generator(logits))) / 2, rel=1e-6)


@pytest.mark.parametrize("overrides, replicas", [({}, 1), ({"update_order": "simultaneous"}, 1), ({}, 2)])
def test_top_k_training_runs_in_both_update_orders_and_on_two_replicas(overrides, replicas):
    trainer = build(tiny_config(topk=0.5, topk_decay_steps=2, **overrides), replicas=replicas)
    output = trainer.train(3)
    assert all(np.isfinite(v) for v in output.metrics.values())
    assert int(trainer.state.step.numpy()) == 3
