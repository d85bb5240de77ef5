"""The run records: LOGDIR/config.json, the resolved flags a run started with,
LOGDIR/dataset.json, what it trained on (`datasets.registry.DatasetInfo`), and for a run started
from another run's weights (`--init_from`), LOGDIR/init_from.json, which checkpoint of which run
it started from; and the folders under LOGDIR that hold its checkpoints."""

from __future__ import annotations

import os
from typing import Any, Callable, TypeVar

from datasets import files

RUN_RECORD_FILE = "config.json"
DATASET_RECORD_FILE = "dataset.json"
INIT_FROM_RECORD_FILE = "init_from.json"
# The periodic checkpoints (each named after its step: ckpt-N), and the best one by FID
# (--eval_every).
CHECKPOINT_SUBDIR = "checkpoints"
BEST_CHECKPOINT_SUBDIR = "checkpoints_best"

Parsed = TypeVar("Parsed")


def read_run_record(logdir: str) -> dict[str, Any] | None:
    """LOGDIR/config.json: the resolved flags a run started with; None when there is none.

    A damaged record raises `files.FileFault` naming it: training cannot check a resume
    against it, and sample, eval and export cannot rebuild the models from it.
    """
    return files.read_json(
        os.path.join(logdir, RUN_RECORD_FILE),
        holds="the flags this run started with, which a resume must keep and sample, eval and "
              "export rebuild its models from",
        fix="Restore it from a copy, or move it away: training then records the flags of the "
            "next command afresh (they must still fit the checkpoints).")


def write_dataset_record(logdir: str, record: dict[str, Any]) -> None:
    """Records what the run trains on in LOGDIR/dataset.json (atomically), so sample and export
    rebuild its models without the data, and a resume can tell when the data has changed."""
    files.write_json(os.path.join(logdir, DATASET_RECORD_FILE), record)


def read_dataset_record(logdir: str, parse: Callable[[dict[str, Any]], Parsed]) -> Parsed | None:
    """`parse` of LOGDIR/dataset.json (`registry.info_from_record`, passed in because this layer
    imports no TensorFlow); None for a run recorded before the file existed. A damaged record,
    or one `parse` rejects, raises `files.FileFault` naming it."""
    return files.read_json(
        os.path.join(logdir, DATASET_RECORD_FILE), parse=parse,
        holds="what this run trained on (shape, classes), which sample and export rebuild its "
              "models from and a resume checks the data against",
        fix="Restore it from a copy, or move it away: the run then reads its dataset again "
            "(which must then be where it was).")
