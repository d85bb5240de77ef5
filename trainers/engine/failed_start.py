"""A run that fails to start leaves its run directory as it found it.

The train mode checks flags and data before it takes the run directory, but some faults show
only once it holds it: a user network Keras cannot save, a setup's image summaries reading a
test split, a damaged record, an evaluation at the first --eval_every. When one of those
(`STARTUP_ERRORS`: what a run's data or flags cause) ends the run before its first checkpoint,
the run removes what it wrote: the directory if it created it, else every file and folder that
was not there, so a resumed run or a folder the user made keeps all it held. Nothing is removed
once the run has written under its checkpoint folders (a checkpoint, or an unreadable one moved
aside), nor on any other error (a preemption, a NaN stop, a crash): that directory is worth
keeping.

Only the holder of the run's lock undoes (in a multi-worker job, the chief): it lists the
directory just before taking the lock and undoes while it still holds it, so no other
trainer's files are ever taken for its own.
"""

from __future__ import annotations

import contextlib
import os
from typing import ContextManager, Iterator

import tensorflow as tf
from absl import logging

from datasets.errors import DatasetError
from datasets.files import FileFault
from trainers.config.flags import ConfigError
from trainers.config.record import BEST_CHECKPOINT_SUBDIR, CHECKPOINT_SUBDIR

STARTUP_ERRORS = (ConfigError, DatasetError, FileFault)
CHECKPOINT_FOLDERS = (CHECKPOINT_SUBDIR, BEST_CHECKPOINT_SUBDIR)


@contextlib.contextmanager
def leaves_nothing_behind(logdir: str, lock: ContextManager) -> Iterator[None]:
    """Holds `lock` (the run's, `run_lock.exclusive_training(logdir)`) over the block; when the
    block raises one of `STARTUP_ERRORS`, removes what it wrote under `logdir` (see the module
    docstring) before the lock is released, and re-raises it (a removal that fails is logged,
    not raised in its place)."""
    before = paths_under(logdir)
    with lock:
        try:
            yield
        except STARTUP_ERRORS:
            try:
                undo(logdir, before)
            except (OSError, tf.errors.OpError) as fault:  # the run's own error says more
                logging.warning("Could not remove what the failed start wrote in %s: %s",
                                logdir, fault)
            raise


def paths_under(logdir: str) -> frozenset[str] | None:
    """Every file and folder under `logdir` (local or remote), or None when it does not exist."""
    if not tf.io.gfile.isdir(logdir):
        return None
    return frozenset(os.path.join(folder, name).rstrip("/")
                     for folder, subfolders, names in tf.io.gfile.walk(logdir)
                     for name in (*subfolders, *names))


def undo(logdir: str, before: frozenset[str] | None) -> None:
    """Removes what appeared under `logdir` since `before` (`paths_under`), and `logdir` when
    it was not there, unless anything appeared in a checkpoint folder."""
    now = paths_under(logdir)
    if now is None:
        return
    new = now - (before or frozenset())
    checkpoint_folders = tuple(os.path.join(logdir, folder, "") for folder in CHECKPOINT_FOLDERS)
    if any(path.startswith(checkpoint_folders) for path in new):
        return
    # A folder's paths sort after it: reversed, each folder is emptied before it goes (on an
    # object store, a folder that only its files implied goes with them).
    for path in sorted(new, reverse=True):
        if tf.io.gfile.exists(path):
            (tf.io.gfile.rmtree if tf.io.gfile.isdir(path) else tf.io.gfile.remove)(path)
    if before is None and tf.io.gfile.exists(logdir):
        tf.io.gfile.rmtree(logdir)
