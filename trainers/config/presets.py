"""`--gan` presets: the hyper-parameters a setup chooses unless a flag overrides them; and
`--train_steps`, whose default depends on `--train_time`.

A preset is resolved once, when a run starts; a resumed run keeps the values it started with
(its `config.json`), so a later retune of a preset never changes a run in progress.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from trainers.config.fields import DEFAULT_TRAIN_STEPS, Config


@dataclasses.dataclass(frozen=True)
class Preset:
    """The hyper-parameters a `--gan` preset sets; each can be overridden by its own flag."""

    loss: str
    optimizer: str
    g_lr: float
    d_lr: float
    beta1: float
    beta2: float
    d_steps: int
    g_steps: int = 1
    penalty: str = "none"
    penalty_weight: float = 0.0
    clip_value: float = 0.0
    d_normalization: str = "none"
    penalty_every: int = 1
    d_spectral_norm: bool = False
    batch_size: int = 64
    topk: float = 1.0
    topk_decay_steps: int = 0
    g_lr_schedule: str = "constant"
    d_lr_schedule: str = "constant"
    lr_hold_steps: int = 0


PRESET_FIELDS = tuple(f.name for f in dataclasses.fields(Preset))
# A preset field a run's config.json lacks was added after the run started; these defaults leave
# its behaviour unchanged (one generator step, no penalty, no top-k...).
_NEUTRAL_PRESET_VALUES = {f.name: f.default for f in dataclasses.fields(Preset)
                          if f.default is not dataclasses.MISSING}
# Flags whose Config default changed: the value a run recorded before the flag existed had.
# (--precision's default became auto; before the flag, every run trained in float32.)
_NEUTRAL_CHANGED_DEFAULTS = {"precision": "float32"}


def resolve_preset(config: Config, preset: Preset, recorded: Mapping[str, Any] | None = None) -> Config:
    """Fills every preset field the user left unset from `preset` (the `--gan` setup's).

    `recorded` is the config.json of the run being resumed (`read_run_record`). A preset is
    resolved once, when a run starts: a resumed run of the same `--gan` takes the unset fields
    from its record, so it continues with the rates and schedule it started with even when
    Gantry's preset has changed since. A field the record lacks did not exist when the run
    started and takes the value that leaves behaviour unchanged. Flags given explicitly win.
    """
    resuming = recorded is not None and recorded.get("gan") == config.gan
    filled = {name: recorded_value(recorded, name, getattr(preset, name)) if resuming
              else getattr(preset, name)
              for name in PRESET_FIELDS if getattr(config, name) is None}
    return dataclasses.replace(config, **filled)


def recorded_value(recorded: Mapping[str, Any], name: str, default: Any = None) -> Any:
    """Flag `name` of a run's config.json. A flag the record lacks did not exist when the run
    started: it takes the value that leaves behaviour unchanged (a preset field's neutral
    value, else the `Config` default), or `default` when there is none."""
    if name in recorded:
        return recorded[name]
    neutral = _NEUTRAL_PRESET_VALUES.get(
        name, _NEUTRAL_CHANGED_DEFAULTS.get(name, getattr(Config, name, None)))
    return default if neutral is None else neutral


def resolve_train_steps(config: Config) -> Config:
    """Fills `--train_steps` when it was not given (None): DEFAULT_TRAIN_STEPS cycles, except
    with `--train_time`, which then alone ends the run (someone who asks for two hours means
    two hours). In a resolved config, None means no cycle limit."""
    if config.train_steps is not None or config.train_time:
        return config
    return dataclasses.replace(config, train_steps=DEFAULT_TRAIN_STEPS)
