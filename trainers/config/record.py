"""The run record: LOGDIR/config.json, the resolved flags a run started with."""

from __future__ import annotations

import json
import os
from typing import Any

RUN_RECORD_FILE = "config.json"


def read_run_record(logdir: str) -> dict[str, Any] | None:
    """LOGDIR/config.json: the resolved flags a run started with; None when there is none."""
    path = os.path.join(logdir, RUN_RECORD_FILE)
    if not os.path.exists(path):
        return None
    with open(path) as file:
        return json.load(file)
