"""Which flags describe a run: its hyper-parameters in TensorBoard's HParams dashboard.

Every resolved `Config` field is one, except those that do not change what is trained or how it
is scored: path fields (where files go; the run's own name is its `--logdir`), the flags of the
other modes (sample, export, eval, train_evaluator), and how often the run logs or saves
(`--steps_per_loop` included: the cycles are the same, only grouped differently). A new field
is therefore an hparam unless it is added to `NOT_HPARAMS` or is a path. A field that is None
after resolution (`--resolution`: the dataset's own) is left out of the run's values: the
dashboard shows an empty cell, not a string in a numeric column.

Pure Python, like the rest of `trainers.config`; `modes/train.py` writes what this returns.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any

from trainers.config.fields import Config

NOT_HPARAMS = frozenset({
    "mode",
    # --mode=sample, export, eval and train_evaluator
    "num_samples", "grid", "interpolate", "truncation", "label", "direction", "export_name",
    "export_version", "export_format", "quantize", "checkpoint", "real_vs_real",
    "evaluator_epochs", "evaluator_train_examples",
    # cadence of outputs, not of training
    "steps_per_loop", "image_every", "histogram_every", "checkpoint_every", "keep_checkpoints",
})


@dataclasses.dataclass(frozen=True)
class HParamSpec:
    """One hparam column: the flag's name, its value type (bool, float for every number, or
    str), its closed set of values when it has one, and its help as the column's description."""

    name: str
    kind: type
    choices: tuple[str, ...]
    description: str


def hparam_specs() -> tuple[HParamSpec, ...]:
    """Every hparam column, in field order; the same for every run, so the dashboard's
    experiment (taken from any one run) fits all of them."""
    hints = typing.get_type_hints(Config)
    return tuple(
        HParamSpec(name=field.name, kind=_value_type(hints[field.name]),
                   choices=field.metadata["choices"], description=field.metadata["help"])
        for field in dataclasses.fields(Config) if _is_hparam(field))


def hparam_values(config: Config) -> dict[str, bool | int | float | str]:
    """The run's value of every hparam that is set (None values are left out)."""
    return {field.name: getattr(config, field.name) for field in dataclasses.fields(Config)
            if _is_hparam(field) and getattr(config, field.name) is not None}


def _is_hparam(field: dataclasses.Field) -> bool:
    return field.name not in NOT_HPARAMS and not field.metadata["path"]


def _value_type(hint: Any) -> type:
    """bool, float (int and float: TensorBoard stores numbers as doubles) or str."""
    if isinstance(hint, types.UnionType):
        hint = next(arg for arg in typing.get_args(hint) if arg is not type(None))
    if hint is bool:
        return bool
    return float if hint in (int, float) else str
