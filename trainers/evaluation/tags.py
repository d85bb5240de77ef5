"""How evaluation results are named in TensorBoard, for `--eval_every` and `--mode=eval` alike.

Each number of a result is the scalar `eval/<name>`; a nested result (CycleGAN's per-direction
metrics) is flattened with "/" (`eval/ab/fid`); lists (per-class values) and non-numbers stay
out of TensorBoard. `--mode=eval` writes into `LOGDIR/eval/` (EVAL_MODE_RUN), a TensorBoard run
of its own: a new event file beside the training's would make a running TensorBoard, which
follows only a directory's newest event file, stop showing the training's new points.
"""

from __future__ import annotations

import numbers
from typing import Any, Mapping

PREFIX = "eval"
EVAL_MODE_RUN = "eval"


def metric_tag(name: str) -> str:
    """The scalar tag of metric `name` ("fid" -> "eval/fid")."""
    return f"{PREFIX}/{name}"


def eval_scalars(results: Mapping[str, Any]) -> dict[str, float]:
    """{tag: value} of every number in `results`, nested mappings flattened (see module doc)."""
    scalars: dict[str, float] = {}

    def add(prefix: str, values: Mapping[str, Any]) -> None:
        for key, value in values.items():
            name = f"{prefix}{key}"
            if isinstance(value, Mapping):
                add(f"{name}/", value)
            elif isinstance(value, numbers.Real) and not isinstance(value, bool):  # NumPy's too
                scalars[metric_tag(name)] = float(value)

    add("", results)
    return scalars
