"""Rebuilding a run for sample, eval and export: its config.json and dataset.json, a checkpoint,
its setup.

The model is rebuilt from the run's own `config.json` through its setup, so only `--logdir` and
the flags of the mode itself matter; no training flag has to be repeated. The data's shape and
classes come from LOGDIR/dataset.json, so a run directory rebuilds without its data (moved,
deleted, or on another machine); a run recorded before that file existed asks its setup, which
reads the data's metadata. User networks come from LOGDIR/networks (`user_networks`), never
from user code.
"""

from __future__ import annotations

import dataclasses
import os

import tensorflow as tf

from datasets.registry import DatasetInfo, info_from_record
from trainers.config.choices import CHECKPOINT_CHOICES
from trainers.config.flags import Config, ConfigError, read_by, recorded_value
from trainers.config.record import (BEST_CHECKPOINT_SUBDIR, CHECKPOINT_SUBDIR, RUN_RECORD_FILE,
                                    read_dataset_record, read_run_record)
from trainers.engine.checkpoints import (listed_checkpoints, newest_intact, open_checkpoint,
                                         path_number, unreadable_reason, warn_unreadable)
from trainers.engine.run_lock import free_to_tidy
from trainers.setups import building, registry, user_networks
from trainers.setups.protocol import Restored, Setup

STEP_VARIABLE = "step/.ATTRIBUTES/VARIABLE_VALUE"


def load_run_config(logdir: str) -> Config:
    """The config a run was trained with, read from LOGDIR/config.json."""
    stored = read_run_record(logdir)
    if stored is None:
        path = os.path.join(logdir, RUN_RECORD_FILE)
        raise ConfigError(
            f"--logdir={logdir!r} holds no training run ({path} is missing); train first with "
            f"`python run.py --logdir={logdir}` or point --logdir at an existing run.")
    # A flag the record lacks did not exist when the run was trained: the value that leaves
    # its behaviour unchanged (a preset field's neutral value, e.g. constant rates, or the
    # value of the flag it takes over). A flag its setup does not read keeps its default.
    setup = registry.get(recorded_value(stored, "setup"))
    return Config(**{name: recorded_value(stored, name) for name in read_by(setup.flag_owners)})


def trained_on(run: Config, setup: Setup) -> DatasetInfo:
    """What the run in `run.logdir` was trained on: its LOGDIR/dataset.json, or for a run
    recorded before that file existed, `setup.dataset_info` (from the data's metadata)."""
    recorded = read_dataset_record(run.logdir, info_from_record)
    return setup.dataset_info(run) if recorded is None else recorded


def latest_checkpoint(logdir: str, which: str = "latest") -> str:
    """The newest intact (`--checkpoint=latest`) or best-FID (`best`) checkpoint of the run in
    `logdir`; ConfigError when there is none yet, or none intact.

    Unreadable newer ones are reported and passed over; they are moved aside only while no
    training process holds the run (`run_lock.free_to_tidy`).
    """
    load_run_config(logdir)  # a logdir without a run is named as such, not as "no checkpoint"
    if which == "best":
        directory = os.path.join(logdir, BEST_CHECKPOINT_SUBDIR)
        hint = "train with --eval_every so the best checkpoint by FID is kept"
    else:
        directory = os.path.join(logdir, CHECKPOINT_SUBDIR)
        hint = "train until the first checkpoint is written (--checkpoint_every)"
    latest, unreadable = newest_intact(directory, may_move=False)
    if unreadable:
        with free_to_tidy(logdir) as free:
            if free:
                latest, unreadable = newest_intact(directory, may_move=True)
        warn_unreadable(unreadable, latest)
    if latest is None:
        raise ConfigError(
            f"--logdir={logdir!r} has no checkpoint in {directory}; {hint} and try again.")
    return latest


def chosen_checkpoint(logdir: str, which: str) -> str:
    """The checkpoint `--checkpoint` names: `latest` or `best` (`latest_checkpoint`), or a step
    number N, the kept checkpoint of step N in LOGDIR/checkpoints (`step_checkpoint`)."""
    if which in CHECKPOINT_CHOICES:
        return latest_checkpoint(logdir, which)
    return step_checkpoint(logdir, int(which))


def step_checkpoint(logdir: str, step: int) -> str:
    """The kept checkpoint of `step` in LOGDIR/checkpoints (training names each checkpoint
    after its step: ckpt-N); ConfigError listing the kept steps when `step` is not one of them,
    or when its files cannot be read."""
    load_run_config(logdir)
    directory = os.path.join(logdir, CHECKPOINT_SUBDIR)
    kept = {path_number(path): path for path in listed_checkpoints(directory)}
    steps = ", ".join(str(number) for number in sorted(kept))
    if step not in kept:
        listing = f"the kept steps are {steps}" if kept else "none is kept yet"
        raise ConfigError(
            f"--checkpoint={step}: {directory} keeps no checkpoint of step {step}; {listing}. "
            "Use one of them, or latest or best; to keep more steps, train with a "
            "--checkpoint_every that divides the steps you want and a larger --keep_checkpoints.")
    reason = unreadable_reason(kept[step])
    if reason is not None:
        raise ConfigError(f"--checkpoint={step}: {kept[step]} cannot be read ({reason}); use "
                          f"another kept step ({steps}) or latest, which passes over damaged ones.")
    return kept[step]


def checkpoint_step(checkpoint: str) -> int:
    """The training cycle at which `checkpoint` was written."""
    return int(open_checkpoint(checkpoint).get_tensor(STEP_VARIABLE))


def restore(logdir: str, *, use_ema: bool, precision: str | None = None,
            checkpoint: str | None = None) -> Restored:
    """Rebuilds the run in `logdir` through its setup and restores `checkpoint` (default: the
    latest).

    `use_ema` asks for the EMA generator as the sampler where the run keeps one. `precision`
    overrides the run's `--precision` for the rebuilt models: mixed-precision weights are
    stored in float32, so a float32 rebuild restores them unchanged (export uses this; TFLite
    cannot convert float16 layers).
    """
    # The run is where it is now (config.json records where it started: it may have moved).
    run = dataclasses.replace(load_run_config(logdir), use_ema=use_ema, logdir=logdir)
    if precision is not None:
        run = dataclasses.replace(run, precision=precision)
    checkpoint = checkpoint or latest_checkpoint(logdir)
    setup = registry.get(run.setup)
    user_networks.require_saved(run, setup.network_roles)
    info = trained_on(run, setup)
    built = building.build_run(setup, run, info, tf.distribute.get_strategy())
    # Restores every model (the EMA generator too, when the run keeps one).
    tf.train.Checkpoint(models=dict(built.models)).restore(checkpoint).expect_partial()
    return Restored(run=run, info=info, built=built, checkpoint=checkpoint,
                    step=checkpoint_step(checkpoint))
