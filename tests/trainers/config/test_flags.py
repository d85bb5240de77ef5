"""Flags are declared once, by their owners, with every fact about them; `Config`, run.py's
flags, the resume check and the presets' checks are derived from the declarations."""

import ast
import dataclasses
import os
import pathlib
import subprocess
import sys

import pytest

from trainers import api
from trainers.config import choices
from trainers.config.flags import (REQUIRED, Config, ConfigError, Flag, check_preset, declare,
                                   declared, read_by, recorded_value, renamed, taken_over)
from trainers.engine import ema_flags
from trainers.engine import flags as engine_flags
from trainers.setups import adversarial_flags, cyclegan, registry
from trainers.setups.kinds import GAN_FLAG_OWNERS

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
FIELDS = declared()


def test_every_field_has_help():
    assert [name for name, field in FIELDS.items() if not field.help.strip()] == []


def test_the_fields_with_choices_and_their_choices():
    # --setup has none: its names come from the setups that register themselves; --checkpoint
    # has none: it also takes a step number.
    assert {name: field.choices for name, field in FIELDS.items()
            if field.choices} == {
        "mode": ("train", "sample", "eval", "export", "plot", "train_evaluator"),
        "strategy": engine_flags.STRATEGIES,
        "g_upsample": adversarial_flags.UPSAMPLINGS,
        "arch": adversarial_flags.ARCHS,
        "loss": adversarial_flags.LOSSES,
        "optimizer": engine_flags.OPTIMIZERS,
        "penalty": adversarial_flags.PENALTIES,
        "d_normalization": adversarial_flags.NORMALIZATIONS,
        "precision": engine_flags.PRECISIONS,
        "g_lr_schedule": choices.LEARNING_RATE_SCHEDULES,
        "d_lr_schedule": choices.LEARNING_RATE_SCHEDULES,
        "student_lr_schedule": choices.LEARNING_RATE_SCHEDULES,
        "nan_policy": engine_flags.NAN_POLICIES,
        "export_format": choices.EXPORT_FORMATS,
        "quantize": choices.QUANTIZATIONS,
        "update_order": adversarial_flags.UPDATE_ORDERS,
        "ema_halflife_schedule": ema_flags.EMA_HALFLIFE_SCHEDULES,
        "direction": tuple(cyclegan.DIRECTIONS),
    }


def test_every_choice_default_is_one_of_its_choices_or_left_to_the_preset():
    assert [name for name, field in FIELDS.items() if field.choices
            and field.default not in (*field.choices, None)] == []


def test_run_py_helpfull_shows_the_fields_help_without_importing_tensorflow():
    result = subprocess.run([sys.executable, "-X", "importtime", "run.py", "--helpfull"], cwd=ROOT,
                            capture_output=True, text=True, timeout=60)
    imported = {line.split("|")[-1].strip().split(".")[0] for line in result.stderr.splitlines()
                if line.startswith("import time:")}
    assert imported & {"tensorflow", "keras"} == set()

    def flag_help(text: str) -> str:
        return "".join(text.split())  # absl wraps the help text; compare it without whitespace

    shown = flag_help(result.stdout)
    expected = [
        f"--mode: {FIELDS['mode'].help} One of: train, sample, eval, export, plot, "
        "train_evaluator. (default: 'train')",
        f"--setup: {FIELDS['setup'].help}",
        f"--d_dropout: {FIELDS['d_dropout'].help} (default: '0.0') (a number)",
        f"--export_version: {FIELDS['export_version'].help} (an integer)",
        f"--[no]use_ema: {FIELDS['use_ema'].help} (default: 'true')",
    ]
    assert [text for text in expected if flag_help(text) not in shown] == []


def _declared_names_in_sources() -> list[str]:
    """Every name given to `Flag(...)` as a literal in the project's code (not the tests)."""
    names = []
    for path in pathlib.Path(ROOT).glob("[gtd]*/**/*.py"):
        if path.parts[len(pathlib.Path(ROOT).parts)] not in ("gan", "trainers", "datasets"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Flag"
                    and node.args and isinstance(node.args[0], ast.Constant)):
                names.append(node.args[0].value)
    return names


def test_every_flag_has_exactly_one_declaration_in_the_sources():
    names = _declared_names_in_sources()
    assert sorted(name for name in set(names) if names.count(name) > 1) == []
    project = {name for name, flag in FIELDS.items() if flag.owner != "two_generators"}
    assert set(names) == project


# Where each owner shared by several setups declares its flags: beside the code that reads them.
SHARED_OWNER_MODULES = {
    "run": "trainers/config/run_flags.py",
    "training": "trainers/engine/flags.py",
    "generator": "trainers/setups/adversarial_flags.py",
    "discriminator": "trainers/setups/adversarial_flags.py",
    "architecture": "trainers/setups/adversarial_flags.py",
    "discriminator architecture": "trainers/setups/adversarial_flags.py",
    "adversarial": "trainers/setups/adversarial_flags.py",
    "ema": "trainers/engine/ema_flags.py",
    "privacy": "trainers/engine/privacy_flags.py",
    "outputs": "trainers/outputs/flags.py",
    "evaluation": "trainers/evaluation/flags.py",
    "features": "trainers/evaluation/flags.py",
    "modes": "trainers/modes/flags.py",
}


def _declaring_modules() -> dict[str, set[str]]:
    """Owner -> the source files of trainers/ whose `declare("owner", ...)` names it."""
    modules = {}
    for path in sorted(pathlib.Path(ROOT, "trainers").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "declare"
                    and node.args and isinstance(node.args[0], ast.Constant)):
                modules.setdefault(node.args[0].value, set()).add(
                    str(path.relative_to(ROOT)))
    return modules


def test_each_owner_declares_its_flags_in_one_module_beside_the_code_that_reads_them():
    modules = _declaring_modules()
    assert {owner: found for owner, found in modules.items() if len(found) > 1} == {}
    assert {owner: modules[owner].pop() for owner in SHARED_OWNER_MODULES} == SHARED_OWNER_MODULES
    project = {flag.owner for flag in FIELDS.values() if flag.owner != "two_generators"}
    assert set(modules) == project


def test_the_flags_modules_import_no_tensorflow():
    flags_modules = sorted({path for found in _declaring_modules().values() for path in found
                            if path.endswith("flags.py")})
    names = [path[:-len(".py")].replace("/", ".") for path in flags_modules]
    assert len(names) == 8
    code = ("import sys\n" + "".join(f"import {name}\n" for name in names)
            + "print(sorted({'tensorflow', 'keras'} & set(sys.modules)))\n")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                            text=True, check=True, timeout=60)
    assert result.stdout == "[]\n"

def test_a_second_declaration_of_a_name_or_an_old_name_is_refused():
    with pytest.raises(ValueError, match=r"Flag --seed is declared twice \(by elsewhere and by run\)"):
        declare("elsewhere", Flag("seed", int, 1, help="again"))


def test_the_fixed_on_resume_flags_are_those_that_change_variables_schedule_or_data_order():
    assert {name for name, flag in FIELDS.items() if flag.fixed_on_resume
            and flag.owner != "two_generators"} == {
        "setup", "dataset", "resolution", "channels", "latent_dim", "g_width", "d_width", "arch",
        "g_extra_blocks", "g_upsample", "r3gan_blocks", "r3gan_expansion", "r3gan_group_width",
        "d_extra_blocks", "d_dropout", "d_normalization", "optimizer", "loss", "batch_size", "d_updates", "g_updates", "seed", "shuffle_buffer",
        "precision", "ema_halflife_kimg", "penalty", "penalty_every", "d_spectral_norm",
        "update_order", "pack", "generator", "discriminator", "dp_l2_clip",
        "dp_noise_multiplier", "dp_microbatches", "domain_a", "domain_b", "teacher",
        "student_width", "student_updates", "init_from"}


def test_a_setups_own_flags_are_declared_by_its_module_as_their_owner():
    assert {name: flag.owner for name, flag in FIELDS.items()
            if flag.owner in ("cyclegan", "student", "distill", "dfad", "conditional", "acgan")} == {
        "domain_a": "cyclegan", "domain_b": "cyclegan", "cycle_weight": "cyclegan",
        "identity_weight": "cyclegan", "direction": "cyclegan", "teacher": "student",
        "student_width": "student", "student_lr": "student", "student_lr_schedule": "student",
        "student_clip_global_norm": "student", "student_updates": "student",
        "temperature": "distill", "hard_weight": "distill",
        "soft_weight": "distill", "hard_weight_start": "distill", "soft_weight_start": "distill",
        "weight_ramp_cycles": "distill", "statistics_weight": "dfad",
        "class_balance_weight": "dfad", "label": "conditional", "aux_weight": "acgan"}


def test_config_is_a_frozen_dataclass_of_every_declared_flag():
    config = Config(seed=3)
    assert [field.name for field in dataclasses.fields(config)] == list(declared())
    assert (config.seed, config.dataset, Config.dataset) == (3, "fashion_mnist", "fashion_mnist")
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.seed = 4
    with pytest.raises(TypeError, match="unexpected keyword argument 'nope'"):
        Config(nope=1)


def test_a_preset_is_checked_against_the_declarations_and_completed_with_neutral_values():
    required = dict(loss="hinge", optimizer="adam", g_lr=1e-4, d_lr=1e-4, beta1=0.0,
                    beta2=0.9, d_updates=1)
    full = check_preset("p", required, GAN_FLAG_OWNERS)
    assert {name: full[name] for name in ("g_updates", "penalty", "topk", "lr_hold_cycles")} == \
        {"g_updates": 1, "penalty": "none", "topk": 1.0, "lr_hold_cycles": 0}
    assert set(full) == {flag.name for flag in FIELDS.values() if flag.preset}
    assert full["student_lr"] is None and full["student_updates"] is None  # not read: None
    with pytest.raises(ValueError, match=r"Preset 'p': missing \['d_updates'\]"):
        check_preset("p", {k: v for k, v in required.items() if k != "d_updates"}, GAN_FLAG_OWNERS)
    with pytest.raises(ValueError, match=r"Preset 'p': not preset flags \['seed'\]"):
        check_preset("p", {**required, "seed": 1}, GAN_FLAG_OWNERS)
    with pytest.raises(ValueError, match=r"Preset 'p': d_updates='1' is not a int\."):
        check_preset("p", {**required, "d_updates": "1"}, GAN_FLAG_OWNERS)
    assert {flag.name for flag in read_by(GAN_FLAG_OWNERS).values()
            if flag.neutral is REQUIRED} == set(required)


def test_a_preset_names_and_needs_only_the_preset_flags_its_setup_reads():
    student = dict(optimizer="adam", beta1=0.9, beta2=0.999, student_lr=1e-3)
    full = check_preset("s", student, ("student",))  # no loss, g_lr, d_lr or d_updates needed
    assert (full["student_lr"], full["student_updates"], full["student_lr_schedule"]) == \
        (1e-3, 1, "constant")
    assert [name for name, value in full.items() if value is not None] == [
        "batch_size", "optimizer", "beta1", "beta2", "beta2_final", "lr_hold_cycles", "student_lr",
        "student_lr_schedule", "student_updates"]
    with pytest.raises(ValueError, match=r"Preset 's': flags of owners it does not read "
                                         r"\['d_updates \(discriminator\)', 'g_lr \(generator\)'\]\."):
        check_preset("s", {**student, "g_lr": 1e-3, "d_updates": 1}, ("student",))
    with pytest.raises(ValueError, match=r"Preset 's': missing \['student_lr'\]"):
        check_preset("s", {k: v for k, v in student.items() if k != "student_lr"}, ("student",))


def test_every_owner_is_common_or_read_by_a_setup():
    named = {owner for name in registry.names() for owner in registry.get(name).flag_owners}
    common = set(flag.owner for flag in read_by(()).values())
    assert common == {"run", "training", "outputs", "evaluation", "modes", "user_networks"}
    assert {flag.owner for flag in FIELDS.values()
            if flag.owner != "two_generators"} - common - named == set()


def test_a_flag_a_setups_own_flag_takes_over_is_moved_to_it_with_one_notice():
    lines = []
    config = taken_over(Config(setup="distill", d_lr=3e-3, d_updates=2, seed=4), ("student",),
                        lines.append)
    assert (config.student_lr, config.student_updates, config.d_lr, config.d_updates,
            config.seed) == (3e-3, 2, None, None, 4)
    assert lines == ["notice: --d_lr is now --student_lr for --setup=distill; --d_lr still works.",
                     "notice: --d_updates is now --student_updates for --setup=distill; "
                     "--d_updates still works."]
    lines.clear()  # a setup reading the discriminator's flags keeps them
    assert taken_over(Config(setup="dcgan", d_lr=3e-3), GAN_FLAG_OWNERS, lines.append) == \
        Config(setup="dcgan", d_lr=3e-3) and lines == []
    with pytest.raises(ConfigError, match=r"--d_lr=0.003 and --student_lr=0.002: --setup=distill "
                                          r"reads --d_lr as --student_lr; give only --student_lr\."):
        taken_over(Config(setup="distill", d_lr=3e-3, student_lr=2e-3), ("student",), lines.append)
    assert recorded_value({"d_lr": 3e-3, "d_updates": 2}, "student_lr") == 3e-3
    assert recorded_value({"d_updates": 2, "student_updates": 5}, "student_updates") == 5


def test_a_flag_a_record_lacks_takes_its_neutral_value():
    assert recorded_value({}, "precision") == "float32"  # every run before the flag: float32
    assert recorded_value({}, "topk") == 1.0 and recorded_value({}, "loss", "hinge") == "hinge"
    assert recorded_value({"seed": 7}, "seed") == 7


def test_an_old_flag_name_works_and_prints_its_new_name_once():
    declare("renaming_test", Flag("renaming_test_new", int, 0, help="h",
                                  renamed_from=("renaming_test_old",)), common=True)
    lines = []
    assert renamed({"renaming_test_old": 3, "seed": 1}, lines.append) == \
        {"renaming_test_new": 3, "seed": 1}
    assert lines == ["notice: --renaming_test_old is now --renaming_test_new; "
                     "--renaming_test_old still works."]
    with pytest.raises(ConfigError, match="give only --renaming_test_new"):
        renamed({"renaming_test_old": 3, "renaming_test_new": 4}, lines.append)
    assert recorded_value({"renaming_test_old": 5}, "renaming_test_new") == 5
    assert api.run_config({"renaming_test_old": 2}).renaming_test_new == 2


def test_the_committed_flag_reference_is_the_one_the_declarations_render():
    # A fresh process: this one may hold flags that tests declared.
    rendered = subprocess.run(
        [sys.executable, "-c", "from trainers import api; print(api.flag_reference(), end='')"],
        cwd=ROOT, capture_output=True, text=True, check=True).stdout
    committed = pathlib.Path(ROOT, "docs", "flags.md").read_text()
    assert committed == rendered, (
        "docs/flags.md is stale: regenerate it with python -c \"from trainers import api; "
        "print(api.flag_reference(), end='')\" > docs/flags.md")
    assert all(f"`--{name}`" in rendered for name, flag in FIELDS.items()
               if flag.owner not in ("two_generators", "renaming_test"))


def test_run_py_takes_old_flag_names_with_one_notice_each_and_speaks_the_new_ones():
    result = subprocess.run([sys.executable, "run.py", "--gan=dcgan", "--d_steps=0",
                             "--train_steps=5"], cwd=ROOT, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 2
    lines = [line for line in result.stderr.splitlines() if not line.startswith(("I0000", "W0000"))]
    assert sorted(lines[:3]) == [
        "notice: --d_steps is now --d_updates; --d_steps still works.",
        "notice: --gan is now --setup; --gan still works.",
        "notice: --train_steps is now --train_cycles; --train_steps still works."]
    assert lines[3:] == ["error: --d_updates=0 is invalid: the discriminator needs at least 1 "
                         "update per cycle (k in k:1 alternation)."]
