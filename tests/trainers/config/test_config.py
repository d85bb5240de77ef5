"""Preset resolution: what a `--gan` preset fills in, and what a flag overrides."""

import dataclasses
import json

import pytest

from trainers.config.fields import Config, ConfigError
from trainers.config.presets import PRESETS, resolve_preset
from trainers.config.record import RUN_RECORD_FILE, read_run_record
from trainers.config.validation import validate


def test_an_unset_batch_size_is_the_presets():
    assert resolve_preset(Config(gan="dcgan")).batch_size == 32
    assert resolve_preset(Config(gan="wgan_gp")).batch_size == 64


def test_the_dcgan_preset_trains_the_generator_faster_with_top_k_and_the_others_do_not():
    dcgan = resolve_preset(Config(gan="dcgan"))
    assert (dcgan.g_lr, dcgan.d_lr, dcgan.topk, dcgan.topk_decay_steps) == (8e-4, 2e-4, 0.5, 5000)
    for name in ("wgan", "wgan_gp", "lsgan", "sngan", "r1", "cgan", "acgan", "cyclegan"):
        assert resolve_preset(Config(gan=name)).topk == 1.0, name
    # --topk=1 turns the preset's top-k off.
    assert resolve_preset(Config(gan="dcgan", topk=1.0)).topk == 1.0


def test_a_given_flag_overrides_every_preset_field():
    given = {"batch_size": 48, "g_lr": 3e-4, "d_steps": 3, "topk": 0.75, "topk_decay_steps": 10}
    for name in PRESETS:
        resolved = resolve_preset(Config(gan=name, **given))
        assert {key: getattr(resolved, key) for key in given} == given


def test_a_resolved_config_has_no_unset_preset_field():
    for name, preset in PRESETS.items():
        resolved = resolve_preset(Config(gan=name))
        assert {field.name: getattr(resolved, field.name) for field in dataclasses.fields(preset)} \
            == dataclasses.asdict(preset)


def test_the_batch_size_is_validated_after_the_preset_fills_it():
    with pytest.raises(ConfigError, match="--batch_size=32 is invalid"):
        validate(resolve_preset(Config(gan="dcgan", cpu_replicas=3)))


@pytest.mark.parametrize("overrides, flag", [
    ({"topk": 0.0}, "--topk=0.0"),
    ({"topk": 1.5}, "--topk=1.5"),
    ({"topk_decay_steps": -1}, "--topk_decay_steps=-1"),
    ({"gan": "cyclegan", "topk": 0.5, "domain_a": "fashion_mnist:Bag",
      "domain_b": "fashion_mnist:Sneaker"}, "--topk=0.5"),
])
def test_top_k_flags_are_validated(overrides, flag):
    with pytest.raises(ConfigError, match=flag):
        validate(resolve_preset(Config(**overrides)))


@pytest.mark.parametrize("overrides, flag", [
    ({"g_extra_blocks": -1}, "--g_extra_blocks=-1"),
    ({"d_extra_blocks": -1}, "--d_extra_blocks=-1"),
    ({"g_upsample": "pixel_shuffle"}, "--g_upsample='pixel_shuffle'"),
    ({"d_dropout": 1.0}, "--d_dropout=1.0"),
    ({"d_dropout": -0.1}, "--d_dropout=-0.1"),
])
def test_network_flags_are_validated(overrides, flag):
    with pytest.raises(ConfigError, match=flag):
        validate(resolve_preset(Config(**overrides)))


def test_a_resumed_run_keeps_the_preset_values_it_started_with(tmp_path):
    # A run started when the dcgan preset trained G at 1e-3 and kept 0.8 of the fakes.
    started = dataclasses.replace(resolve_preset(Config(gan="dcgan")), g_lr=1e-3, topk=0.8)
    (tmp_path / RUN_RECORD_FILE).write_text(json.dumps(started.as_dict()))
    recorded = read_run_record(str(tmp_path))
    resumed = resolve_preset(Config(gan="dcgan"), recorded)
    assert (resumed.g_lr, resumed.topk) == (1e-3, 0.8)
    assert resumed.d_lr == PRESETS["dcgan"].d_lr
    # A flag given on the resuming command still wins.
    assert resolve_preset(Config(gan="dcgan", g_lr=5e-5), recorded).g_lr == 5e-5
    # A record of another preset is not this run's: check_resumable refuses the --gan change.
    assert resolve_preset(Config(gan="lsgan"), recorded).g_lr == PRESETS["lsgan"].g_lr


def test_a_preset_field_missing_from_an_older_record_keeps_its_old_behaviour(tmp_path):
    started = resolve_preset(Config(gan="dcgan")).as_dict()
    del started["topk"], started["topk_decay_steps"]  # recorded before top-k existed
    resumed = resolve_preset(Config(gan="dcgan"), started)
    assert (resumed.topk, resumed.topk_decay_steps) == (1.0, 0)
    assert read_run_record(str(tmp_path)) is None
