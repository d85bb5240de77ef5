"""The only place that maps `--setup` names to setups.

Each setup declares the names it serves (`Setup.presets`); `register` adds a setup under those
names. The built-in setups are registered when this module is imported; a user's setup (or a
test's) is added with `register` or, for a limited time, `registered`. Importing the registry
imports no TensorFlow (see `protocol`), so `resolve` checks flags in a second.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, Mapping

from trainers.config import source_run
from trainers.config.choices import learning_rate_schedule_flags
from trainers.config.flags import Config, ConfigError, check_preset, declared, read_by, taken_over
from trainers.config.presets import resolve_preset, resolve_train_cycles
from trainers.config.validation import validate
from trainers.setups.conditional import AuxiliaryClassifierGAN, ConditionalGAN
from trainers.setups.cyclegan import CycleGAN
# distill before dfad: distill's module declares the student's flags, which come first in the
# flag reference and Config.
from trainers.setups.distill import Distillation  # isort: skip
from trainers.setups.dfad import DataFreeDistillation  # isort: skip
from trainers.setups.protocol import Setup
from trainers.setups.unconditional import UnconditionalGAN
from trainers.setups.user_networks import check_flags as check_user_networks

_SETUPS: dict[str, Setup] = {}


def register(setup: Setup) -> None:
    """Serves every name of `setup.presets` with `setup`; ValueError when a name is taken or a
    preset does not fit the flag declarations (`flags.check_preset`); ImportError when the
    shared flags its presets are checked against are not declared yet."""
    if "setup" not in declared():
        raise ImportError("The shared flags are not declared: import trainers.api (it declares "
                          "every flag, in order) before trainers.setups.registry.")
    if not setup.presets:
        raise ValueError(f"{type(setup).__name__} declares no presets: give it at least one "
                         "--setup name in Setup.presets.")
    for name, preset in setup.presets.items():
        check_preset(name, preset, setup.flag_owners)
    taken = sorted(set(setup.presets) & set(_SETUPS))
    if taken:
        raise ValueError(f"--setup names {taken} are already registered "
                         f"(by {type(_SETUPS[taken[0]]).__name__}).")
    for name in setup.presets:
        _SETUPS[name] = setup


def unregister(setup: Setup) -> None:
    """Removes every name `setup` serves."""
    for name in setup.presets:
        if _SETUPS.get(name) is setup:
            del _SETUPS[name]


@contextlib.contextmanager
def registered(setup: Setup) -> Iterator[Setup]:
    """`setup` registered for the duration of a `with` block."""
    register(setup)
    try:
        yield setup
    finally:
        unregister(setup)


def names() -> tuple[str, ...]:
    """Every registered `--setup` name, in registration order."""
    return tuple(_SETUPS)


def metric_names() -> tuple[str, ...]:
    """Every metric any registered setup reports (`Setup.metrics`), each once, in registration
    order: one list of metric columns for every run, whatever its setup."""
    return tuple(dict.fromkeys(name for setup in _SETUPS.values() for name in setup.metrics))


def get(name: str) -> Setup:
    """The setup serving `--setup=name`; ConfigError listing the known names otherwise."""
    if name not in _SETUPS:
        raise ConfigError(f"--setup={name!r} is invalid: use one of {', '.join(_SETUPS)}.")
    return _SETUPS[name]


def resolve(config: Config, recorded: Mapping[str, Any] | None = None) -> Config:
    """The config to run: `config` as given, with the flags its setup's own flags take over
    (`flags.taken_over`: `--d_lr` is distill's `--student_lr`, with a notice), the `--setup`
    preset filled in (from `recorded`, the config.json of a run being resumed, where it has the
    value), `--train_cycles`' default, the generic checks, and the setup's own; for a new
    training run, the run `--init_from` names (a resume reads its own checkpoints, not that
    run's: it may be gone).

    A training run that gives a flag its setup does not read is refused: it would be ignored;
    so is a user network (`--generator`, `--discriminator`) for a role the setup does not have.
    """
    setup = get(config.setup)
    config = taken_over(config, setup.flag_owners)
    if config.mode == "train":
        _refuse_foreign_flags(config, setup)
    resolved = validate(resolve_train_cycles(
        resolve_preset(config, setup.presets[config.setup], setup.flag_owners, recorded)))
    check_user_networks(resolved, setup.network_roles)
    setup.check_flags(resolved)
    if resolved.mode == "train":
        _refuse_lazy_nothing(config, resolved)
        _refuse_unread_hold(config, resolved)
        if resolved.init_from and recorded is None:
            source_run.check(resolved.init_from)
    return resolved


def _refuse_unread_hold(config: Config, resolved: Config) -> None:
    """An explicit --lr_hold_cycles with no inverse_sqrt schedule would be ignored: refused. (The
    dcgan preset's own hold stays quietly unused when both schedules are given otherwise.)"""
    read = [flag for flag in learning_rate_schedule_flags() if getattr(resolved, flag) is not None]
    if config.lr_hold_cycles and all(getattr(resolved, flag) != "inverse_sqrt" for flag in read):
        raise ConfigError(
            f"--lr_hold_cycles={config.lr_hold_cycles} is invalid: it holds an inverse_sqrt "
            f"schedule's rate, and no schedule of --setup={config.setup} "
            f"({', '.join('--' + flag for flag in read)}) is inverse_sqrt; set one to "
            "inverse_sqrt, or leave --lr_hold_cycles out.")


def _refuse_lazy_nothing(config: Config, resolved: Config) -> None:
    """An explicit --penalty_every > 1 with no penalty would be ignored: refused. (A preset's own
    interval, r1's 16, stays quietly unused under --penalty=none.)"""
    if config.penalty_every is not None and config.penalty_every > 1 and resolved.penalty == "none":
        raise ConfigError(
            f"--penalty_every={config.penalty_every} is invalid: --setup={config.setup} trains with "
            f"--penalty=none, so there is no penalty to apply lazily; add a --penalty "
            f"(e.g. gradient_penalty or r1) or drop --penalty_every.")


def _refuse_foreign_flags(config: Config, setup: Setup) -> None:
    """One rule for every setup: a flag of an owner that is not common and that this setup
    does not name in `flag_owners` would be ignored, so a training run that gives it (`config`
    as given: it is not its default) is refused."""
    reading = read_by(setup.flag_owners)
    for flag in declared().values():
        if flag.name in reading or getattr(config, flag.name) == flag.default:
            continue
        owners = [name for name, other in _SETUPS.items() if flag.owner in other.flag_owners]
        raise ConfigError(
            f"--{flag.name}={getattr(config, flag.name)!r} is invalid: only --setup="
            f"{'|'.join(owners)} reads it and this run is --setup={config.setup}; drop it, or "
            f"train one of those.")

for _setup in (UnconditionalGAN(), ConditionalGAN(), AuxiliaryClassifierGAN(), CycleGAN(),
               Distillation(), DataFreeDistillation()):
    register(_setup)
