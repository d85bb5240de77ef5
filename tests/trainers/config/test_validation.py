"""`validate`: every bad value is a ConfigError naming the flag, the value and the fix."""

import dataclasses
import re

import pytest

from trainers.config.flags import Config, ConfigError, check_preset, declared
from trainers.setups.kinds import GAN_FLAG_OWNERS
from trainers.config.validation import (frozen_structure, parse_lr_multipliers, train_time_seconds,
                                        validate)

# A resolved config: the defaults, with the preset fields filled as a --setup preset fills them.
RESOLVED = dataclasses.replace(Config(), **check_preset("test", dict(
    loss="non_saturating", optimizer="adam", g_lr=2e-4, d_lr=2e-4, beta1=0.5, beta2=0.999, d_updates=1),
    GAN_FLAG_OWNERS))
CHOICE_FIELDS = [flag for flag in declared().values() if flag.choices]


def test_the_resolved_defaults_are_valid():
    assert validate(RESOLVED) is RESOLVED


@pytest.mark.parametrize("field", CHOICE_FIELDS, ids=lambda field: field.name)
def test_a_value_outside_a_fields_choices_names_the_flag_and_lists_the_choices(field):
    with pytest.raises(ConfigError) as error:
        validate(dataclasses.replace(RESOLVED, **{field.name: "bogus"}))
    assert str(error.value) == (f"--{field.name}='bogus' is invalid: use one of "
                                f"{', '.join(field.choices)}.")


def test_a_bad_loss_lists_every_loss():
    with pytest.raises(ConfigError) as error:
        validate(dataclasses.replace(RESOLVED, loss="foo"))
    assert str(error.value) == ("--loss='foo' is invalid: use one of minimax, non_saturating, "
                                "wasserstein, hinge, least_squares, relativistic.")


def test_a_bad_mode_lists_every_mode():
    with pytest.raises(ConfigError) as error:
        validate(dataclasses.replace(RESOLVED, mode="serve"))
    assert str(error.value) == ("--mode='serve' is invalid: use one of train, sample, eval, export, "
                                "plot, train_evaluator.")


@pytest.mark.parametrize("penalty", ["gradient_penalty", "one_sided_gradient_penalty"])
def test_the_gradient_penalties_refuse_batch_norm_and_accept_laziness(penalty):
    with pytest.raises(ConfigError, match=f"^--d_normalization='batch' is invalid: batch norm mixes"):
        validate(dataclasses.replace(RESOLVED, penalty=penalty, d_normalization="batch"))
    lazy = dataclasses.replace(RESOLVED, penalty=penalty, penalty_every=4, d_updates=5)
    assert validate(lazy) is lazy


@pytest.mark.parametrize("overrides, flag", [
    ({"topk": 0.0}, "--topk=0.0"),
    ({"topk": 1.5}, "--topk=1.5"),
    ({"topk_decay_cycles": -1}, "--topk_decay_cycles=-1"),
])
def test_top_k_flags_are_validated(overrides, flag):
    with pytest.raises(ConfigError, match=flag):
        validate(dataclasses.replace(RESOLVED, **overrides))


@pytest.mark.parametrize("overrides, flag", [
    ({"g_extra_blocks": -1}, "--g_extra_blocks=-1"),
    ({"d_extra_blocks": -1}, "--d_extra_blocks=-1"),
    ({"d_dropout": 1.0}, "--d_dropout=1.0"),
    ({"d_dropout": -0.1}, "--d_dropout=-0.1"),
])
def test_network_flags_are_validated(overrides, flag):
    with pytest.raises(ConfigError, match=flag):
        validate(dataclasses.replace(RESOLVED, **overrides))


@pytest.mark.parametrize("overrides, flag", [
    ({"seed": -1}, "--seed=-1"),
    ({"seed": 2**32}, f"--seed={2**32}"),
    ({"g_lr": float("inf")}, "--g_lr=inf"),
    ({"d_lr": 1e308}, "--d_lr=1e+308"),
    ({"penalty_weight": float("nan")}, "--penalty_weight=nan"),
    ({"d_clip_global_norm": 1e39}, "--d_clip_global_norm=1e+39"),
    ({"truncation": float("-inf")}, "--truncation=-inf"),
])
def test_seeds_and_floats_out_of_their_machine_range_are_refused(overrides, flag):
    """Each used to start the run and crash in Keras or end in a non-finite step."""
    with pytest.raises(ConfigError, match=f"^{re.escape(flag)} is invalid: use "):
        validate(dataclasses.replace(RESOLVED, **overrides))
    validate(dataclasses.replace(RESOLVED, seed=2**32 - 1, g_lr=1e-30))


@pytest.mark.parametrize("text, problem", [
    ("generator", r"'generator' is not REGEX=FACTOR"),
    ("=2", r"'=2' is not REGEX=FACTOR"),
    ("seed=1,,up0=2", r"'' is not REGEX=FACTOR"),
    ("up(0=2", r"'up\(0' is not a regular expression"),
    ("seed=-1", r"the factor of 'seed' is '-1'"),
    ("seed=nan", r"the factor of 'seed' is 'nan'"),
    ("seed=inf", r"the factor of 'seed' is 'inf'"),
    ("seed=fast", r"the factor of 'seed' is 'fast'"),
    ("seed=1,seed=2", r"patterns \['seed'\] appear twice"),
])
def test_bad_lr_multipliers_are_refused_naming_the_flag(text, problem):
    with pytest.raises(ConfigError, match=f"^--lr_multipliers={re.escape(repr(text))} is invalid: .*{problem}"):
        validate(dataclasses.replace(RESOLVED, lr_multipliers=text))


def test_lr_multipliers_parse_in_order_and_a_resume_keeps_only_patterns_and_zeros():
    assert parse_lr_multipliers("") == ()
    assert parse_lr_multipliers("generator/seed=0,a=b=0.5,up.=2") == (
        ("generator/seed", 0.0), ("a=b", 0.5), ("up.", 2.0))
    assert frozen_structure("seed=0,up0=2") == frozen_structure("seed=0.0,up0=0.1")
    assert frozen_structure("seed=0,up0=2") != frozen_structure("seed=0,up0=0")
    assert frozen_structure("seed=0,up0=2") != frozen_structure("up0=2,seed=0")


PRIVATE = {"dp_l2_clip": 1.0, "dp_noise_multiplier": 1.1}


@pytest.mark.parametrize("overrides, message", [
    ({"dp_l2_clip": 1.0}, "--dp_noise_multiplier=0.0 is invalid: differential privacy needs noise"),
    ({"dp_noise_multiplier": 1.0}, "--dp_l2_clip=0.0 is invalid: differential privacy needs a "
                                   "clipping norm"),
    ({**PRIVATE, "dp_microbatches": 5}, "--dp_microbatches=5 is invalid: use 0 (one per example) "
                                        "or a divisor of --batch_size=64"),
    ({**PRIVATE, "dp_delta": 1.0}, "--dp_delta=1.0 is invalid"),
    ({**PRIVATE, "pack": 2}, "--pack=2 is invalid: a pack mixes 2 examples"),
    ({**PRIVATE, "penalty": "r1"}, "--penalty='r1' is invalid: this penalty differentiates the "
                                   "discriminator at real images outside the per-example clipping"),
    ({**PRIVATE, "penalty": "gradient_penalty"}, "--penalty='gradient_penalty' is invalid"),
    ({**PRIVATE, "penalty": "one_sided_gradient_penalty"},
     "--penalty='one_sided_gradient_penalty' is invalid"),
    ({**PRIVATE, "penalty": "dragan"}, "--penalty='dragan' is invalid"),
    ({**PRIVATE, "consistency_weight": 10.0}, "--consistency_weight=10.0 is invalid: consistency "
                                              "regularization reads real images"),
    ({**PRIVATE, "d_normalization": "batch"}, "--d_normalization='batch' is invalid: batch norm in "
                                              "the discriminator mixes the examples of a batch, "
                                              "which breaks per-example differential privacy "
                                              "(--dp_l2_clip); use --d_normalization=none or layer."),
    ({**PRIVATE, "update_order": "simultaneous"}, "--update_order='simultaneous' is invalid"),
    ({**PRIVATE, "precision": "mixed_float16"}, "--precision='mixed_float16' is invalid"),
    ({**PRIVATE, "jit_compile": True}, "--jit_compile=True is invalid"),
])
def test_differential_privacy_refuses_what_would_break_it(overrides, message):
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}"):
        validate(dataclasses.replace(RESOLVED, **overrides))


def test_differential_privacy_accepts_microbatches_packs_inside_them_and_r2():
    validate(dataclasses.replace(RESOLVED, **PRIVATE, dp_microbatches=16, pack=4, penalty="r2",
                                 dp_delta=1e-5))


def test_train_time_takes_seconds_minutes_and_hours():
    assert [train_time_seconds(t) for t in ("90s", "10m", "2h", "1.5h", "")] == [
        90.0, 600.0, 7200.0, 5400.0, None]


@pytest.mark.parametrize("text", ["10", "0s", "-5m", "10 m", "2d", "m"])
def test_a_bad_train_time_names_the_flag_and_the_form(text):
    with pytest.raises(ConfigError, match=re.escape(
            f"--train_time={text!r} is invalid: use a positive number followed by s, m or h")):
        validate(dataclasses.replace(RESOLVED, train_time=text))


def test_train_time_refuses_multi_worker_whose_clocks_could_stop_workers_apart():
    with pytest.raises(ConfigError, match=re.escape("--strategy='multi_worker' is invalid")):
        validate(dataclasses.replace(RESOLVED, train_time="10m", strategy="multi_worker"))


def test_train_time_takes_decaying_rates_and_ramps():
    timed = dataclasses.replace(RESOLVED, train_time="10m", g_lr_schedule="cosine",
                                d_lr_schedule="linear", penalty_ramp_cycles=5)
    assert validate(timed) is timed


def test_inverse_sqrt_needs_a_hold():
    held = dataclasses.replace(RESOLVED, g_lr_schedule="inverse_sqrt", lr_hold_cycles=10000)
    assert validate(held) is held
    with pytest.raises(ConfigError) as error:
        validate(dataclasses.replace(RESOLVED, d_lr_schedule="inverse_sqrt", lr_hold_cycles=0))
    assert str(error.value) == (
        "--lr_hold_cycles=0 is invalid: --d_lr_schedule=inverse_sqrt keeps the full rate for "
        "--lr_hold_cycles cycles, then decays from there; use 1 or more, e.g. 10000.")
    with pytest.raises(ConfigError, match=r"^--lr_hold_cycles=-1 is invalid: use 0 or more"):
        validate(dataclasses.replace(RESOLVED, lr_hold_cycles=-1))


@pytest.mark.parametrize("value", ["latest", "best", "0", "1200"])
def test_checkpoint_takes_latest_best_or_a_step_number(value):
    assert validate(dataclasses.replace(RESOLVED, checkpoint=value)).checkpoint == value


@pytest.mark.parametrize("value", ["newest", "-5", "12.0", "", " 3", "step4"])
def test_any_other_checkpoint_is_refused_naming_the_forms(value):
    with pytest.raises(ConfigError) as error:
        validate(dataclasses.replace(RESOLVED, checkpoint=value))
    assert str(error.value) == (f"--checkpoint={value!r} is invalid: use latest or best, or the "
                                "step number of a kept checkpoint, e.g. 1200.")


@pytest.mark.parametrize("overrides, message", [
    (dict(evaluator="inceptionv3"), "--evaluator='inceptionv3' is invalid: use domain (Gantry's "
                                    "classifier), inception (the standard FID network), "
                                    "keras_inception_v3, or the path of a .keras/.h5 model."),
    (dict(inception_graph="g.pb"), "--inception_graph='g.pb' is invalid: it is read by "
                                   "--evaluator=inception only (not --evaluator=domain); drop it "
                                   "or use --evaluator=inception."),
    (dict(evaluator="inception", keras_inception_weights="w.h5"),
     "--keras_inception_weights='w.h5' is invalid: it is read by --evaluator=keras_inception_v3 "
     "only (Keras's InceptionV3, whose FIDs are not comparable with published ones); the "
     "standard FID network is --evaluator=inception with --inception_graph."),
])
def test_each_feature_network_takes_only_its_own_file_flag(overrides, message):
    with pytest.raises(ConfigError) as error:
        validate(dataclasses.replace(RESOLVED, **overrides))
    assert str(error.value) == message


def test_the_feature_networks_and_their_files_are_accepted():
    for overrides in (dict(evaluator="inception", inception_graph=""),
                      dict(evaluator="keras_inception_v3", keras_inception_weights="w.h5"),
                      dict(evaluator="model.keras")):
        config = dataclasses.replace(RESOLVED, **overrides)
        assert validate(config) is config
