"""Checkpoint files of a run, on one machine or many.

Under `MultiWorkerMirroredStrategy` every worker must take part in saving, but only the chief's
files are kept: the others save into a temporary folder of their own, deleted right after.
Every worker restores from the chief's folder, so `--logdir` must be on a filesystem that all
workers share (NFS, GCS, ...). On a single worker this is a `tf.train.CheckpointManager`.

A checkpoint is complete once it is listed: TensorFlow writes its files first and then the
listing (the `checkpoint` file), atomically, so one being written when the process died is never
listed. A listed checkpoint can still be damaged later (a disk or copy fault): before restoring,
every tensor is read back, which checks it against its stored CRC32C. An unreadable one is
reported and moved aside into `corrupt/`, and the newest intact one is used (`newest_intact`).
"""

from __future__ import annotations

import dataclasses
import os
import shutil

import tensorflow as tf
from absl import logging

from trainers.config.flags import ConfigError

# Under a checkpoint directory: the checkpoints found unreadable, kept for inspection.
CORRUPT_SUBDIR = "corrupt"
# TensorFlow's listing of a checkpoint directory, written after each complete save.
LISTING_FILE = "checkpoint"


@dataclasses.dataclass(frozen=True)
class Unreadable:
    """A listed checkpoint that failed to read: why, and where it went (None: left in place)."""

    path: str
    reason: str
    moved_to: str | None

    def describe(self) -> str:
        where = f"moved to {self.moved_to}" if self.moved_to else "left in place"
        return f"{self.path} cannot be read ({self.reason}); {where}"


def open_checkpoint(path: str):
    """A reader of checkpoint `path` (`get_tensor(key)`).

    Not `tf.train.load_checkpoint`, which takes an unknown path on ram:// for a directory.
    """
    return tf.compat.v1.train.NewCheckpointReader(path)


def unreadable_reason(path: str) -> str | None:
    """None when every tensor of checkpoint `path` reads back intact, else what went wrong."""
    try:
        reader = open_checkpoint(path)
        for name in reader.get_variable_to_dtype_map():
            reader.get_tensor(name)
    except Exception as error:  # noqa: BLE001  a damaged file raises OpError, IndexError, ...
        lines = str(error).strip().splitlines()
        return f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__
    return None


def newest_intact(directory: str, *, may_move: bool) -> tuple[str | None, list[Unreadable]]:
    """The newest listed checkpoint in `directory` that reads back intact (None when none is
    listed), and the newer ones that did not, moved into `directory/corrupt/` if `may_move`.

    ConfigError when checkpoints are listed but none is intact: nothing is moved then, and the
    message says what to do.
    """
    listed, timestamps, recovered = _listing(directory)
    failures = []
    for index in range(len(listed) - 1, -1, -1):
        reason = unreadable_reason(listed[index])
        if reason is None:
            unreadable = [Unreadable(path, why, _move_aside(path) if may_move else None)
                          for path, why in failures]
            if may_move and (failures or recovered):
                _relist(directory, listed[:index + 1], timestamps[:index + 1])
            return listed[index], unreadable
        failures.append((listed[index], reason))
    if failures:
        details = "; ".join(f"{path}: {why}" for path, why in failures)
        raise ConfigError(
            f"None of the {len(failures)} checkpoints in {directory} can be read ({details}). "
            f"Put back an intact copy, or move {directory} away to train again from step 0.")
    return None, []


def warn_unreadable(unreadable: list[Unreadable], used: str) -> None:
    """One warning line per checkpoint passed over for `used`."""
    for entry in unreadable:
        logging.warning("Checkpoint %s; using %s instead.", entry.describe(), used)


def path_number(path: str) -> int:
    """N of a checkpoint path ".../ckpt-N": the number it was saved with, which training gives
    as its step."""
    return int(path.rsplit("-", 1)[1])


def listed_checkpoints(directory: str) -> list[str]:
    """The checkpoints listed in `directory`, oldest first (recovered from the files when the
    listing is damaged); not checked for damage."""
    return _listing(directory)[0]


def _listing(directory: str) -> tuple[list[str], list[float], bool]:
    """The checkpoints listed in `directory` (oldest first), their timestamps, and whether the
    list was recovered from the files because the listing is damaged.

    TensorFlow ignores a damaged listing, which would restart training from step 0 over the
    checkpoints still there; instead every `ckpt-N.index` found is a candidate, by step. With no
    listing at all, nothing was ever saved completely: files there are from a save cut short.
    """
    state = tf.train.get_checkpoint_state(directory)
    if state is not None:
        return (list(state.all_model_checkpoint_paths),
                list(state.all_model_checkpoint_timestamps), False)
    if not tf.io.gfile.exists(os.path.join(directory, LISTING_FILE)):
        return [], [], False
    found = sorted((index[:-len(".index")] for index in
                    tf.io.gfile.glob(os.path.join(directory, "ckpt-*.index"))),
                   key=path_number)
    if found:
        logging.warning("%s has no readable listing (its `checkpoint` file); using the %d "
                        "checkpoints found by their files.", directory, len(found))
    return found, [], bool(found)


def _relist(directory: str, paths: list[str], timestamps: list[float]) -> None:
    """Rewrites the listing of `directory` to `paths`, the way `CheckpointManager` writes it
    (atomically, relative paths; TensorFlow exports no public function for this in TF2)."""
    tf.__internal__.train.update_checkpoint_state(
        directory, paths[-1], all_model_checkpoint_paths=paths,
        all_model_checkpoint_timestamps=timestamps or None, save_relative_paths=True)


def _move_aside(path: str) -> str:
    """Moves the files of checkpoint `path` into `corrupt/` beside it; returns its new path."""
    corrupt = os.path.join(os.path.dirname(path), CORRUPT_SUBDIR)
    tf.io.gfile.makedirs(corrupt)
    name = os.path.basename(path)
    target, attempt = os.path.join(corrupt, name), 1
    while tf.io.gfile.glob(target + ".*"):  # an earlier fault at the same step
        attempt += 1
        target = os.path.join(corrupt, f"{name}.{attempt}")
    for file in tf.io.gfile.glob(path + ".*"):  # ckpt-N.index, ckpt-N.data-*
        tf.io.gfile.rename(file, target + file[len(path):])
    return target


class RunCheckpoints:
    """The `CheckpointManager` interface the controller uses: save, latest, restore."""

    def __init__(self, checkpoint: tf.train.Checkpoint, directory: str, *, max_to_keep: int,
                 is_chief: bool = True, worker: int = 0):
        self.checkpoint = checkpoint
        self.directory = directory
        self.is_chief = is_chief
        if is_chief:
            self.writer_directory = directory
        else:
            self.writer_directory = os.path.join(
                os.path.dirname(directory.rstrip("/")), f".worker-{worker}-tmp", "checkpoints")
        self.max_to_keep = max_to_keep if is_chief else 1
        self.writer = self._new_writer()

    def _new_writer(self) -> tf.train.CheckpointManager:
        """A manager of this worker's checkpoints (it reads their listing when created)."""
        return tf.train.CheckpointManager(self.checkpoint, self.writer_directory,
                                          max_to_keep=self.max_to_keep)

    @property
    def latest_checkpoint(self) -> str | None:
        """The chief's latest checkpoint, which every worker restores."""
        return tf.train.latest_checkpoint(self.directory)

    @property
    def checkpoints(self) -> list[str]:
        """The kept checkpoints (the chief's), oldest first."""
        state = tf.train.get_checkpoint_state(self.directory)
        return list(state.all_model_checkpoint_paths) if state else []

    def restore_latest(self, *, may_move: bool = False) -> tuple[str | None, list[Unreadable]]:
        """Restores the newest intact checkpoint, if any (`newest_intact`). Only the chief, and
        only when `may_move` (it holds the run's lock), moves unreadable ones aside and deletes
        unfinished saves. Returns the path restored and the unreadable checkpoints passed over."""
        may_move = may_move and self.is_chief
        if may_move:
            self.remove_unfinished()
        latest, unreadable = newest_intact(self.directory, may_move=may_move)
        if latest is not None:
            warn_unreadable(unreadable, latest)
            self.checkpoint.restore(latest).assert_existing_objects_matched()
        if may_move:  # the listing may have changed under the manager
            self.writer = self._new_writer()
        return latest, unreadable

    def remove_unfinished(self) -> None:
        """Deletes what saves cut short left here. TensorFlow writes a checkpoint's shards into
        `<prefix>_temp/` and merges them into place at the end; a killed save leaves the folder,
        which is never listed and which a later save does not always remove. Call it only while
        no process can be saving here (the chief, holding the run's lock)."""
        for unfinished in tf.io.gfile.glob(os.path.join(self.directory, "*_temp")):
            tf.io.gfile.rmtree(unfinished)

    def save(self, checkpoint_number: int) -> str:
        """Saves on this worker; a non-chief's copy is deleted at once. Returns the kept path."""
        path = self.writer.save(checkpoint_number=checkpoint_number)
        if not self.is_chief:
            self.discard_worker_copy()
            return os.path.join(self.directory, os.path.basename(path))
        return path

    def discard_worker_copy(self) -> None:
        """Deletes a non-chief worker's temporary folder (nothing on the chief)."""
        if not self.is_chief:
            shutil.rmtree(os.path.dirname(self.writer_directory), ignore_errors=True)
