"""`Config` owns its flags: each field carries its help and choices, and run.py's flags are
generated from them."""

import dataclasses
import os
import subprocess
import sys

from trainers.config import fields
from trainers.config.fields import Config

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
FIELDS = {field.name: field for field in dataclasses.fields(Config)}


def test_every_field_has_help():
    assert [name for name, field in FIELDS.items() if not field.metadata["help"].strip()] == []


def test_the_fields_with_choices_and_their_choices():
    # --gan has none: its names come from the setups that register themselves; --checkpoint
    # has none: it also takes a step number.
    assert {name: field.metadata["choices"] for name, field in FIELDS.items()
            if field.metadata["choices"]} == {
        "mode": ("train", "sample", "eval", "export", "plot", "train_evaluator"),
        "strategy": fields.STRATEGIES,
        "g_upsample": fields.UPSAMPLINGS,
        "arch": fields.ARCHS,
        "loss": fields.LOSSES,
        "optimizer": fields.OPTIMIZERS,
        "penalty": fields.PENALTIES,
        "d_normalization": fields.NORMALIZATIONS,
        "precision": fields.PRECISIONS,
        "g_lr_schedule": fields.LEARNING_RATE_SCHEDULES,
        "d_lr_schedule": fields.LEARNING_RATE_SCHEDULES,
        "nan_policy": fields.NAN_POLICIES,
        "export_format": fields.EXPORT_FORMATS,
        "quantize": fields.QUANTIZATIONS,
        "update_order": fields.UPDATE_ORDERS,
        "direction": fields.DIRECTIONS,
    }


def test_every_choice_default_is_one_of_its_choices_or_left_to_the_preset():
    assert [name for name, field in FIELDS.items() if field.metadata["choices"]
            and field.default not in (*field.metadata["choices"], None)] == []


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
        f"--mode: {FIELDS['mode'].metadata['help']} One of: train, sample, eval, export, plot, "
        "train_evaluator. (default: 'train')",
        f"--gan: {FIELDS['gan'].metadata['help']}",
        f"--d_dropout: {FIELDS['d_dropout'].metadata['help']} (default: '0.0') (a number)",
        f"--export_version: {FIELDS['export_version'].metadata['help']} (an integer)",
        f"--[no]use_ema: {FIELDS['use_ema'].metadata['help']} (default: 'true')",
    ]
    assert [text for text in expected if flag_help(text) not in shown] == []
