"""The run record: LOGDIR/config.json, the resolved flags a run started with."""

from __future__ import annotations

import os
from typing import Any

from datasets import files

RUN_RECORD_FILE = "config.json"


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
