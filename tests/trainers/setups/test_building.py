"""--lr_multipliers through a real setup: factor-0 variables stay bit-exact (no update, no
slots, EMA still aligned) while the others move, 2 replicas do what 1 does, a resume is
bit-exact, and patterns that match nothing or freeze a whole model are refused."""

import dataclasses

import numpy as np
import pytest

from tests.trainers.tiny import IMAGE_INFO, build_run, tiny_config
from trainers.config.fields import ConfigError
from trainers.engine import rates
from trainers.engine.distribution import make_strategy
from trainers.setups import registry

MULTIPLIERS = "generator/seed/=0,generator/to_image=0.5,discriminator/down0=2,discriminator/logits/bias=0"
FROZEN = ("generator/seed/kernel", "discriminator/logits/bias")
CONFIG = tiny_config(lr_multipliers=MULTIPLIERS, ema_halflife_kimg=0.01)


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
        registry.get(config.setup).build(config, IMAGE_INFO, make_strategy("default"))


def test_each_optimizer_takes_the_rate_its_setup_gives_and_a_missing_one_is_refused():
    """The rate of each optimizer is what `Setup.learning_rates` says, not a naming convention:
    the distillation student follows its own entry."""
    import keras

    from trainers.engine.phases import LossOutput, Phase
    from trainers.setups import building
    from trainers.setups.protocol import LearningRate

    models = {"student": keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])}
    phase = Phase(name="student", models=("student",), loss=lambda m, i: LossOutput(loss=0.0))
    config = tiny_config(train_cycles=10)
    optimizers, _, _ = building.build_optimizers(
        config, (phase,), models, {"student": LearningRate(0.25, "constant")})
    assert float(optimizers["student"].learning_rate) == pytest.approx(0.25)
    with pytest.raises(ValueError, match=r"Optimizers \['student'\] have no learning rate"):
        building.build_optimizers(config, (phase,), models,
                                  {"generator": LearningRate(0.25, "constant")})
