"""What a run directory holds: the checkpoint a restart restores, the best checkpoint record,
and, at the end, what a run that was killed again and again holds that its reference does not."""

from __future__ import annotations

import dataclasses
import json
import os
import re

from benchmarks.chaos_processes import read_text

LATEST = re.compile(r'^model_checkpoint_path: "ckpt-(\d+)"', re.MULTILINE)
CHECKPOINT_FOLDERS = ("checkpoints", "checkpoints_best")
# Where Gantry moves a listed checkpoint that no longer reads back (trainers/engine/checkpoints.py).
CORRUPT_FOLDER = "corrupt"
# Every training process writes its own event file, so their number differs by design.
EVENT_FILE = re.compile(r"^events\.out\.tfevents\.")


def latest_checkpoint_step(logdir: str) -> int:
    """The step of the checkpoint the `checkpoint` state file names (what a restart restores)."""
    path = os.path.join(logdir, "checkpoints", "checkpoint")
    found = LATEST.search(read_text(path)) if os.path.exists(path) else None
    return int(found.group(1)) if found else 0


def folder_entries(logdir: str, folder: str) -> set[str]:
    path = os.path.join(logdir, folder)
    return set(os.listdir(path)) if os.path.isdir(path) else set()


def read_best_record(logdir: str) -> dict | None:
    path = os.path.join(logdir, "checkpoints_best", "best.json")
    return json.loads(read_text(path)) if os.path.exists(path) else None


@dataclasses.dataclass(frozen=True)
class EndState:
    """What a run directory holds at the end that its reference's does not, event files aside.

    Both hold LOGDIR/.gantry-lock, the run lock's file, which stays after training (the lock
    itself is the flock on it, gone with its holder). A trainer deletes the `*_temp` folders of
    saves cut short in checkpoints/ when it starts and every kill is followed by a restart, so
    `unfinished` must be empty (in checkpoints_best/, which is not swept, only if the redone
    save cleans up); no kill may make a listed checkpoint unreadable, so `corrupt` must be too.
    """

    unfinished: list[str]
    corrupt: list[str]
    other: list[str]

    def clean(self) -> bool:
        return not self.unfinished and not self.corrupt


def end_state(logdir: str, reference: str) -> EndState:
    """Compares LOGDIR and its checkpoint folders with the reference's, entry by entry."""
    unfinished, corrupt, other = [], [], []
    for folder in ("", *CHECKPOINT_FOLDERS):
        for name in sorted(folder_entries(logdir, folder) - folder_entries(reference, folder)):
            path = os.path.join(folder, name)
            if name == CORRUPT_FOLDER:
                corrupt += [os.path.join(path, moved)
                            for moved in sorted(folder_entries(logdir, path))] or [path]
            elif name.endswith("_temp"):
                unfinished.append(path)
            elif folder or not EVENT_FILE.match(name):
                other.append(path)
    return EndState(unfinished=unfinished, corrupt=corrupt, other=other)
