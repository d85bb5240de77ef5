"""Preset resolution: what a preset fills in, what a flag overrides, what a resumed run keeps."""

import json
import re

import pytest

from trainers.config.flags import Config, ConfigError, check_preset
from trainers.config.presets import DEFAULT_TRAIN_CYCLES
from trainers.config.presets import resolve_preset, resolve_train_cycles
from trainers.setups import registry
from trainers.setups.kinds import GAN_FLAG_OWNERS as GAN
from trainers.config.record import RUN_RECORD_FILE, read_run_record

PRESET = dict(loss="hinge", optimizer="adam", g_lr=8e-4, d_lr=2e-4, beta1=0.5, beta2=0.999,
              d_updates=2, batch_size=32, topk=0.5, topk_decay_cycles=100)
OTHER = {**PRESET, "g_lr": 1e-4, "topk": 1.0, "topk_decay_cycles": 0}


def test_a_resolved_config_has_every_preset_field_of_its_preset():
    resolved = resolve_preset(Config(setup="x"), PRESET, GAN)
    full = check_preset("x", PRESET, GAN)
    assert {name: getattr(resolved, name) for name in full} == full
    assert full["g_updates"] == 1 and full["penalty"] == "none"  # unnamed: the neutral values


def test_a_given_flag_overrides_every_preset_field():
    given = {"batch_size": 48, "g_lr": 3e-4, "d_updates": 3, "topk": 0.75, "topk_decay_cycles": 10,
             "penalty": "r1", "d_spectral_norm": True}
    resolved = resolve_preset(Config(setup="x", **given), PRESET, GAN)
    assert {key: getattr(resolved, key) for key in given} == given
    assert resolved.d_lr == PRESET["d_lr"]


def test_a_resumed_run_keeps_the_preset_values_it_started_with(tmp_path):
    # The run started when the preset was OTHER; the preset has been retuned since.
    started = resolve_preset(Config(setup="x"), OTHER, GAN)
    (tmp_path / RUN_RECORD_FILE).write_text(json.dumps(started.as_dict()))
    recorded = read_run_record(str(tmp_path))
    resumed = resolve_preset(Config(setup="x"), PRESET, GAN, recorded)
    assert (resumed.g_lr, resumed.topk, resumed.topk_decay_cycles) == (1e-4, 1.0, 0)
    # A flag given on the resuming command still wins.
    assert resolve_preset(Config(setup="x", g_lr=5e-5), PRESET, GAN, recorded).g_lr == 5e-5
    # A record of another --setup is not this run's (the resume check refuses the change).
    assert resolve_preset(Config(setup="y"), PRESET, GAN, recorded).g_lr == PRESET["g_lr"]


def test_a_preset_field_missing_from_an_older_record_keeps_its_old_behaviour(tmp_path):
    started = resolve_preset(Config(setup="x"), PRESET, GAN).as_dict()
    del started["topk"], started["topk_decay_cycles"], started["penalty"]  # before they existed
    resumed = resolve_preset(Config(setup="x"), PRESET, GAN, started)
    assert (resumed.topk, resumed.topk_decay_cycles, resumed.penalty) == (1.0, 0, "none")
    assert read_run_record(str(tmp_path)) is None


def test_train_time_alone_leaves_the_cycles_unlimited_and_given_cycles_still_count():
    assert resolve_train_cycles(Config()).train_cycles == DEFAULT_TRAIN_CYCLES == 6000
    assert resolve_train_cycles(Config(train_time="2h")).train_cycles is None
    assert resolve_train_cycles(Config(train_time="2h", train_cycles=40)).train_cycles == 40
    assert resolve_train_cycles(Config(train_cycles=40)).train_cycles == 40
    # The run's resolved config (what config.json records) says the same.
    assert registry.resolve(Config(train_time="2h")).train_cycles is None
    assert registry.resolve(Config()).train_cycles == 6000


def test_the_dcgan_preset_holds_its_rates_then_decays_and_a_run_begun_at_constant_rates_keeps_them():
    resolved = registry.resolve(Config(setup="dcgan"))
    assert (resolved.g_lr_schedule, resolved.d_lr_schedule, resolved.lr_hold_cycles) == (
        "inverse_sqrt", "inverse_sqrt", 10000)
    wgan = registry.resolve(Config(setup="wgan"))
    assert (wgan.g_lr_schedule, wgan.d_lr_schedule, wgan.lr_hold_cycles) == (
        "inverse_sqrt", "inverse_sqrt", 5000)
    wgan_gp = registry.resolve(Config(setup="wgan_gp"))
    assert (wgan_gp.g_lr_schedule, wgan_gp.d_lr_schedule, wgan_gp.lr_hold_cycles) == (
        "constant", "constant", 0)
    # A dcgan run recorded before the schedules were preset fields resumes at constant rates;
    # a schedule given on the resuming command still wins.
    recorded = resolved.as_dict()
    for flag in ("g_lr_schedule", "d_lr_schedule", "lr_hold_cycles"):
        del recorded[flag]
    resumed = registry.resolve(Config(setup="dcgan"), recorded)
    assert (resumed.g_lr_schedule, resumed.d_lr_schedule, resumed.lr_hold_cycles) == (
        "constant", "constant", 0)
    assert registry.resolve(Config(setup="dcgan", d_lr_schedule="cosine"),
                            recorded).d_lr_schedule == "cosine"


def test_an_explicit_hold_no_schedule_reads_is_refused_but_the_presets_own_is_not():
    constant = registry.resolve(Config(setup="dcgan", g_lr_schedule="constant", d_lr_schedule="linear"))
    assert constant.lr_hold_cycles == 10000  # the preset's, read by nothing: quietly unused
    with pytest.raises(ConfigError, match=re.escape(
            "--lr_hold_cycles=500 is invalid: it holds an inverse_sqrt schedule's rate, and no "
            "schedule of --setup=wgan_gp (--g_lr_schedule, --d_lr_schedule) is inverse_sqrt; set one "
            "to inverse_sqrt, or leave --lr_hold_cycles out.")):
        registry.resolve(Config(setup="wgan_gp", lr_hold_cycles=500))
    # The student's schedule is distill's: an inverse_sqrt one reads the hold.
    with pytest.raises(ConfigError, match=re.escape("no schedule of --setup=distill "
                                                    "(--student_lr_schedule) is inverse_sqrt")):
        registry.resolve(Config(setup="distill", lr_hold_cycles=500))
    assert registry.resolve(Config(setup="distill", lr_hold_cycles=500,
                                   student_lr_schedule="inverse_sqrt")).lr_hold_cycles == 500
    with pytest.raises(ConfigError, match=re.escape("--student_lr_schedule=inverse_sqrt keeps the "
                                                    "full rate for --lr_hold_cycles cycles")):
        registry.resolve(Config(setup="distill", student_lr_schedule="inverse_sqrt"))


def test_the_preset_flags_a_setup_does_not_read_stay_none_also_from_an_older_record():
    # A distill run recorded when its preset named the GAN flags (and the student read --d_lr).
    recorded = {"setup": "distill", "loss": "non_saturating", "g_lr": 1e-3, "d_lr": 3e-3,
                "d_updates": 2, "topk": 1.0}
    resumed = registry.resolve(Config(setup="distill"), recorded)
    assert (resumed.loss, resumed.g_lr, resumed.d_lr, resumed.d_updates, resumed.topk) == \
        (None, None, None, None, None)
    assert (resumed.student_lr, resumed.student_updates) == (3e-3, 2)
