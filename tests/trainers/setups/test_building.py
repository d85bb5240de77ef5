"""`building.build_run`: an optimizer for every optimizer the phases name, at the rate its
setup gives, the setup's variables in the strategy scope and its models under the precision;
--lr_multipliers through a real setup: factor-0 variables stay bit-exact (no update, no
slots, EMA still aligned) while the others move, 2 replicas do what 1 does, a resume is
bit-exact, and patterns that match nothing or freeze a whole model are refused."""

import dataclasses

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.trainers.tiny import IMAGE_INFO, build_run, tiny_config
from trainers.config.flags import ConfigError
from trainers.engine import rates
from trainers.engine.distribution import make_strategy
from trainers.engine.phases import LossOutput, Phase
from trainers.setups import building, registry
from trainers.setups.protocol import LearningRate, Parts, Setup

MULTIPLIERS = "generator/seed/=0,generator/to_image=0.5,discriminator/down0=2,discriminator/logits/bias=0"
FROZEN = ("generator/seed/kernel", "discriminator/logits/bias")
CONFIG = tiny_config(lr_multipliers=MULTIPLIERS, ema_halflife_kimg=0.01)


class TwoOptimizers(Setup):
    """Models "a" and "b": "a" trained by two phases on one optimizer (one lazy), "b" by its
    own; `rates` are its learning rates."""

    def __init__(self, rates):
        self.rates = rates

    def learning_rates(self, config):
        return self.rates

    def build(self, config, info):
        models = {name: keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)], name=name)
                  for name in ("a", "b")}
        loss = lambda models, inputs: LossOutput(loss=0.0)  # noqa: E731
        phases = (Phase(name="a", models=("a",), loss=loss),
                  Phase(name="lazy", models=("a",), optimizers=("a",), loss=loss, every=4),
                  Phase(name="b", models=("b",), loss=loss))
        return Parts(models=models, phases=phases, loss_weights={"w": tf.Variable(1.0)})


RATES = {"a": LearningRate(0.25, "constant"), "b": LearningRate(0.5, "linear")}


def test_build_run_builds_an_optimizer_for_every_optimizer_the_phases_name():
    """Each at the rate `Setup.learning_rates` gives it by name, not by a naming convention."""
    built = building.build_run(TwoOptimizers(RATES), tiny_config(train_cycles=10), IMAGE_INFO,
                               make_strategy("default"))
    assert set(built.optimizers) == set(built.learning_rate_scales) == {"a", "b"}
    assert [float(built.optimizers[name].learning_rate) for name in "ab"] == [0.25, 0.5]
    # Built on their variables (slots exist) before any compiled step.
    assert all(optimizer.built for optimizer in built.optimizers.values())
    assert [phase.name for phase in built.phases] == ["a", "lazy", "b"]
    assert set(built.loss_weights) == {"w"} and built.sampling is None
    assert built.train_time_progress is None
    timed = building.build_run(TwoOptimizers(RATES), tiny_config(train_time="10m"), IMAGE_INFO,
                               make_strategy("default"))
    assert float(timed.train_time_progress.numpy()) == 0.0


def test_build_run_refuses_an_optimizer_without_a_rate():
    with pytest.raises(ValueError, match=r"Optimizers \['b'\] have no learning rate: "
                                         r"Setup.learning_rates gives only \['a'\]"):
        building.build_run(TwoOptimizers({"a": RATES["a"]}), tiny_config(), IMAGE_INFO,
                           make_strategy("default"))


def test_build_run_makes_the_setups_variables_in_the_scope_and_its_models_at_the_precision():
    built = building.build_run(TwoOptimizers(RATES), tiny_config(precision="mixed_bfloat16"),
                               IMAGE_INFO, make_strategy("mirrored", cpu_replicas=2))
    assert isinstance(built.loss_weights["w"], tf.distribute.DistributedValues)
    assert built.models["a"].layers[0].compute_dtype == "bfloat16"
    assert keras.mixed_precision.global_policy().name == "float32"  # not left set


def named(models, name):
    """{variable name: value} of every variable of model `name` (trainable or frozen)."""
    return {rates.variable_name(name, v): v.numpy() for v in models[name].variables}


def saved(state):
    """The models' variables and the optimizers' (slots and step counts)."""
    return [*(v for m in state.models.values() for v in m.variables),
            *(v for o in state.optimizers.values() for v in o.variables)]


def test_frozen_variables_stay_exact_others_move_on_two_replicas_as_on_one(tmp_path):
    built, single = build_run(CONFIG)
    _, mirrored = build_run(CONFIG, replicas=2)
    for name in ("generator", "discriminator", "generator_ema"):
        for a, b in zip(single.state.models[name].variables, mirrored.state.models[name].variables):
            b.assign(a)
    before = {name: named(built.models, name) for name in ("generator", "discriminator")}
    metrics = single.train(2).metrics
    mirrored.train(2)
    checkpoint = single.state.checkpoint().save(str(tmp_path / "ckpt"))
    for trainer in (single, mirrored):
        models = trainer.state.models
        for name in ("generator", "discriminator"):
            after = named(models, name)
            for variable, value in before[name].items():
                if variable in FROZEN:
                    np.testing.assert_array_equal(after[variable], value, err_msg=variable)
                elif "/" in variable and "seed_generator" not in variable:
                    assert np.any(after[variable] != value), variable
            # no slots for frozen variables: Adam holds iterations + 2 slots per trained variable
            optimizer = trainer.state.optimizers[name]
            assert len(optimizer.variables) == 1 + 2 * len(models[name].trainable_variables)
        np.testing.assert_array_equal(models["generator_ema"].get_layer("seed").kernel.numpy(),
                                      before["generator"]["generator/seed/kernel"])
    assert metrics["generator/learning_rate"] == pytest.approx(CONFIG.g_lr)  # the base rate
    for name in ("generator", "discriminator", "generator_ema"):
        for a, b in zip(single.state.models[name].variables, mirrored.state.models[name].variables):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-6, err_msg=a.path)

    # resume: 2 + 2 cycles equal 4 straight, variables and optimizer slots bit for bit
    single.train(2)
    _, resumed = build_run(CONFIG)
    resumed.state.checkpoint().restore(checkpoint).assert_existing_objects_matched()
    resumed.train(2)
    for a, b in zip(saved(single.state), saved(resumed.state), strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=a.path)


@pytest.mark.parametrize("multipliers, message", [
    ("generator/seed/=0,generator/dense=2",
     r"\['generator/dense'\] match no variable of the trained models \['discriminator', "
     r"'generator'\]; their names look like \[.*'generator/seed/kernel'"),
    ("generator/=0", r"it freezes every variable of \['generator'\]"),
])
def test_patterns_that_change_nothing_or_freeze_a_model_are_refused(multipliers, message):
    config = dataclasses.replace(CONFIG, lr_multipliers=multipliers)
    with pytest.raises(ConfigError, match=rf"^--lr_multipliers='{multipliers}' is invalid: {message}"):
        building.build_run(registry.get(config.setup), config, IMAGE_INFO, make_strategy("default"))


@pytest.mark.parametrize("cycle, time_share, expected", [
    (0, None, 0.0), (50, None, 10.0), (100, None, 20.0), (10, 0.5, 10.0)])
def test_a_cosine_ema_half_life_rises_from_0_over_cycles_or_the_time_budget(cycle, time_share,
                                                                            expected):
    config = dataclasses.replace(tiny_config(setup="r3gan"), train_cycles=100)
    assert (config.ema_halflife_kimg, config.ema_halflife_schedule) == (20.0, "cosine")
    time_progress = None if time_share is None else tf.Variable(time_share)
    got = building.ema_halflife_kimg(config, tf.constant(cycle), time_progress)
    assert float(got) == pytest.approx(expected, rel=1e-6)
    constant = dataclasses.replace(config, ema_halflife_schedule="constant")
    assert building.ema_halflife_kimg(constant, tf.constant(cycle)) == 20.0


def test_r3gans_optimizers_are_adam_with_beta1_0_and_a_rising_beta2():
    config = tiny_config(setup="r3gan", train_cycles=10)
    built, _ = build_run(config)
    # D's optimizer also takes the lazy R1 + R2 updates (every 4 cycles: cycles 0, 4 and 8)
    for name, updates in (("generator", 10), ("discriminator", 13)):
        optimizer = built.optimizers[name]
        assert isinstance(optimizer, building.ScheduledAdam)
        assert (optimizer.beta_1, optimizer.beta_2, optimizer.beta_2_final) == (0.0, 0.9, 0.99)
        assert float(optimizer.beta_2_at(updates)) == pytest.approx(0.99)
        assert float(optimizer.beta_2_at(updates - 1)) < 0.99
    assert not isinstance(build_run(tiny_config(setup="dcgan"))[0].optimizers["generator"],
                          building.ScheduledAdam)
