"""Which flags describe a run: its hyper-parameters in TensorBoard's HParams dashboard.

Every declared flag is one unless its declaration says otherwise (`Flag.hparam`: the flags of
the other modes, how often the run logs or saves) or it is a path (where files go; the run's
own name is its `--logdir`). A flag that is None after resolution (`--resolution`: the
dataset's own) is left out of the run's values: the dashboard shows an empty cell, not a
string in a numeric column.

Pure Python, like the rest of `trainers.config`; `modes/train.py` writes what this returns.
"""

from __future__ import annotations

import dataclasses

from trainers.config.flags import Config, declared


@dataclasses.dataclass(frozen=True)
class HParamSpec:
    """One hparam column: the flag's name, its value type (bool, float for every number, or
    str), its closed set of values when it has one, and its help as the column's description."""

    name: str
    kind: type
    choices: tuple[str, ...]
    description: str


def hparam_specs() -> tuple[HParamSpec, ...]:
    """Every hparam column, in declaration order; the same for every run, so the dashboard's
    experiment (taken from any one run) fits all of them."""
    return tuple(
        HParamSpec(name=flag.name, kind=_value_type(flag.type), choices=flag.choices,
                   description=flag.help)
        for flag in declared().values() if flag.is_hparam)


def hparam_values(config: Config) -> dict[str, bool | int | float | str]:
    """The run's value of every hparam that is set (None values are left out)."""
    return {flag.name: getattr(config, flag.name) for flag in declared().values()
            if flag.is_hparam and getattr(config, flag.name) is not None}


def _value_type(value_type: type) -> type:
    """bool, float (int and float: TensorBoard stores numbers as doubles) or str."""
    return float if value_type in (int, float) else value_type
