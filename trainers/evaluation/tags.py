"""How evaluation results are named, in logs, JSON and TensorBoard, for `--eval_every` and
`--mode=eval` alike.

A metric computed on a network's features carries that network's name (`features_name`):
`fid_domain` is FID on Gantry's domain classifier, `fid_inception` on the standard FID
Inception graph (the one comparable with published FIDs), `fid_keras_inception_v3` on Keras's
InceptionV3, `fid_custom` on a user's model file. Numbers on different features are different
scales; the names keep them apart in every record and chart. Metrics computed on no network
(a toy's modes, a student's accuracy) keep their plain names.

Each number of a result is the scalar `eval/<name>`; a nested result (CycleGAN's per-direction
metrics) is flattened with "/" (`eval/ab/fid`); lists (per-class values) and non-numbers stay
out of TensorBoard. `--mode=eval` writes into `LOGDIR/eval/` (EVAL_MODE_RUN), a TensorBoard run
of its own: a new event file beside the training's would make a running TensorBoard, which
follows only a directory's newest event file, stop showing the training's new points.
"""

from __future__ import annotations

import numbers
from typing import Any, Mapping

from trainers.config.choices import NAMED_EVALUATORS

PREFIX = "eval"
EVAL_MODE_RUN = "eval"
# What `gan.evaluation.evaluate_generator` may report, every one computed on the features or the
# class predictions of the evaluator network: of any images (the last four with a classifying
# evaluator; the HParams dashboard shows the first columns by default), then of a
# class-conditional generator.
IMAGE_METRICS = ("fid", "kid", "precision", "recall", "kid_std", "inception_score",
                 "inception_score_std", "coverage", "class_kl")
CONDITIONAL_METRICS = ("intra_fid", "intra_fid_per_class", "class_accuracy")
FEATURE_METRICS = IMAGE_METRICS + CONDITIONAL_METRICS


FEATURE_NAMES = (*NAMED_EVALUATORS, "custom")


def features_name(evaluator: str) -> str:
    """The name metric keys carry for `--evaluator`'s value: its own for the named networks,
    "custom" for a model file."""
    return evaluator if evaluator in NAMED_EVALUATORS else "custom"


def feature_key(name: str, features: str) -> str:
    """The key of metric `name` computed on `features` ("fid", "domain" -> "fid_domain"; a
    nested name keeps its prefix: "ab/fid" -> "ab/fid_domain")."""
    return f"{name}_{features}"


def split_features(key: str) -> tuple[str, str | None]:
    """`feature_key` undone: "kid_std_domain" -> ("kid_std", "domain"); a key naming no features
    ("modes") -> (key, None)."""
    for features in sorted(FEATURE_NAMES, key=len, reverse=True):
        if key.endswith(f"_{features}"):
            return key[: -len(features) - 1], features
    return key, None


def name_features(results: Mapping[str, Any], features: str) -> dict[str, Any]:
    """`results` of `gan.evaluation` with every key naming `features`."""
    return {feature_key(key, features): value for key, value in results.items()}


def metric_tag(name: str) -> str:
    """The scalar tag of metric `name` ("fid_domain" -> "eval/fid_domain")."""
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
