"""Presets: the values a setup gives the preset flags (`Flag.preset`) unless a flag overrides
them; and `--train_cycles`, whose default depends on `--train_time`.

A preset is a mapping flag -> value, written once, in its setup's module; `flags.check_preset`
checks it when the setup registers. It is resolved once, when a run starts; a resumed run keeps
the values it started with (its `config.json`), so a later retune of a preset never changes a
run in progress.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterable, Mapping

from trainers.config.flags import Config, check_preset, read_by, recorded_value

# --train_cycles when it is not given and --train_time is not either.
DEFAULT_TRAIN_CYCLES = 6000


def resolve_preset(config: Config, preset: Mapping[str, Any], owners: Iterable[str],
                   recorded: Mapping[str, Any] | None = None) -> Config:
    """Fills every preset flag the user left unset (None) from `preset`, of the setup naming
    `owners` (`Setup.flag_owners`); the preset flags it does not read stay None.

    `recorded` is the config.json of the run being resumed (`read_run_record`). A preset is
    resolved once, when a run starts: a resumed run of the same setup takes the unset flags
    from its record, so it continues with the rates and schedule it started with even when
    Gantry's preset has changed since. A flag the record lacks did not exist when the run
    started and takes the value that leaves behaviour unchanged, or that of the flag it takes
    over (`Flag.takes_over`: an older distill run's --d_lr is its student's rate). Flags given
    explicitly win.
    """
    full = check_preset(config.setup, preset, owners)
    resuming = recorded is not None and recorded_value(recorded, "setup") == config.setup
    reading = read_by(owners)
    filled = {name: recorded_value(recorded, name, value) if resuming and name in reading
              else value for name, value in full.items() if getattr(config, name) is None}
    return dataclasses.replace(config, **filled)


def resolve_train_cycles(config: Config) -> Config:
    """Fills `--train_cycles` when it was not given (None): DEFAULT_TRAIN_CYCLES cycles, except
    with `--train_time`, which then alone ends the run (someone who asks for two hours means
    two hours). In a resolved config, None means no cycle limit."""
    if config.train_cycles is not None or config.train_time:
        return config
    return dataclasses.replace(config, train_cycles=DEFAULT_TRAIN_CYCLES)
