"""Checkpoint files of a run, on one machine or many.

Under `MultiWorkerMirroredStrategy` every worker must take part in saving, but only the chief's
files are kept: the others save into a temporary folder of their own, deleted right after.
Every worker restores from the chief's folder, so `--logdir` must be on a filesystem that all
workers share (NFS, GCS, ...). On a single worker this is a `tf.train.CheckpointManager`.
"""

from __future__ import annotations

import os
import shutil

import tensorflow as tf

# Under --logdir: the periodic checkpoints, and the best one by FID (--eval_every).
CHECKPOINT_SUBDIR = "checkpoints"
BEST_CHECKPOINT_SUBDIR = "checkpoints_best"


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
        self.writer = tf.train.CheckpointManager(
            checkpoint, self.writer_directory, max_to_keep=max_to_keep if is_chief else 1)

    @property
    def latest_checkpoint(self) -> str | None:
        """The chief's latest checkpoint, which every worker restores."""
        return tf.train.latest_checkpoint(self.directory)

    @property
    def checkpoints(self) -> list[str]:
        """The kept checkpoints (the chief's), oldest first."""
        state = tf.train.get_checkpoint_state(self.directory)
        return list(state.all_model_checkpoint_paths) if state else []

    def restore_latest(self) -> str | None:
        """Restores the latest checkpoint, if any, and returns its path."""
        latest = self.latest_checkpoint
        if latest is not None:
            self.checkpoint.restore(latest).assert_existing_objects_matched()
        return latest

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
