"""The run `--init_from=LOGDIR[:STEP]` starts a new run from (fine-tuning): parsed, and checked
before TensorFlow is imported, so a mistyped source is named in a second, not after the build.

The checks are what the filesystem tells: LOGDIR exists and holds a Gantry run (its
config.json), and a checkpoint (of STEP, when given) is kept in LOGDIR/checkpoints. Whether that
checkpoint reads back intact, and whether its models fit the new run's, only TensorFlow can say
(`modes.init_from`). A source on another filesystem (gs://...) is left to that later check.
"""

from __future__ import annotations

import dataclasses
import os
import re

from datasets import files
from trainers.config.flags import ConfigError
from trainers.config.record import CHECKPOINT_SUBDIR, RUN_RECORD_FILE

_INDEX = re.compile(r"ckpt-([0-9]+)\.index")


@dataclasses.dataclass(frozen=True)
class Source:
    """The source run's directory, and the step of the checkpoint to start from (None: its
    newest intact one)."""

    logdir: str
    step: int | None


def parse(value: str) -> Source:
    """`--init_from`'s value: LOGDIR, or LOGDIR:STEP when what follows the last colon is a step
    number (so gs://bucket/run is a directory, gs://bucket/run:400 its step 400)."""
    head, colon, tail = value.rpartition(":")
    if colon and head and tail.isdigit():
        return Source(head, int(tail))
    return Source(value, None)


def check(value: str) -> Source:
    """`parse(value)`, or a ConfigError naming --init_from when LOGDIR is no Gantry run, or keeps
    no checkpoint (of STEP)."""
    source = parse(value)
    fix = "name the --logdir of a trained run, optionally with :STEP (one of its kept checkpoints)"
    if not files.exists(source.logdir):
        raise ConfigError(f"--init_from={value!r}: {source.logdir} does not exist; {fix}.")
    if not files.exists(os.path.join(source.logdir, RUN_RECORD_FILE)):
        raise ConfigError(f"--init_from={value!r}: {source.logdir} holds no Gantry run (it has no "
                          f"{RUN_RECORD_FILE}); {fix}.")
    if files.is_local(source.logdir):
        _check_kept(value, source)
    return source


def _check_kept(value: str, source: Source) -> None:
    """ConfigError when the local run `source` keeps no checkpoint, or none of `source.step`."""
    directory = os.path.join(source.logdir, CHECKPOINT_SUBDIR)
    names = os.listdir(directory) if os.path.isdir(directory) else []
    kept = sorted(int(match[1]) for match in map(_INDEX.fullmatch, names) if match)
    if not kept:
        raise ConfigError(f"--init_from={value!r}: the run in {source.logdir} has no checkpoint "
                          f"yet ({directory} is empty); train it until its first checkpoint "
                          "(--checkpoint_every), or name another run.")
    if source.step is not None and source.step not in kept:
        raise ConfigError(f"--init_from={value!r}: {directory} keeps no checkpoint of step "
                          f"{source.step}; its kept steps are {', '.join(map(str, kept))}. Use "
                          "one of them, or leave out :STEP to start from the newest.")
