"""The periodic jobs a training run attaches to its controller.

Each builder returns a `PeriodicAction`; all of them write through the default summary
writer, which `training.train` sets.
"""

from __future__ import annotations

from typing import Mapping

import keras
import numpy as np
import tensorflow as tf

from trainers import summaries
from trainers.controller import LoopReport, PeriodicAction


def scalar_summaries() -> PeriodicAction:
    """Per-phase averages of the loop (losses, scores, gradient norms, learning rates) and speed."""

    def write(report: LoopReport) -> None:
        scalars = dict(report.output.metrics)
        scalars["perf/images_per_second"] = report.images_per_second
        summaries.write_scalars(scalars, step=report.step)

    return PeriodicAction(name="scalars", every=0, fn=write)


class _SampleWriter:
    """Draws the fixed-noise samples with one compiled function and writes them."""

    def __init__(self, *, sample, noise: tf.Tensor, kind: str, modes: np.ndarray | None):
        self._sample = tf.function(sample)
        self._noise = noise
        self._kind = kind
        self._modes = modes

    @property
    def traces(self) -> int:
        """How often the sampling function was traced (1 for a whole run)."""
        return self._sample.experimental_get_tracing_count()

    def __call__(self, report: LoopReport) -> None:
        outputs = self._sample(self._noise).numpy()
        if self._kind == "points":
            summaries.write_scatter("samples", outputs, step=report.step, modes=self._modes)
        else:
            summaries.write_image_grid("samples", outputs, step=report.step)


def sample_summaries(*, every: int, sample, noise: tf.Tensor, kind: str,
                     modes: np.ndarray | None = None) -> PeriodicAction:
    """Samples from one fixed noise batch (the same all run long, so progress is visible).

    Images become a grid; 2-D points a scatter plot over the true modes.
    """
    writer = _SampleWriter(sample=sample, noise=noise, kind=kind, modes=modes)
    return PeriodicAction(name="samples", every=every, fn=writer)


def histogram_summaries(*, every: int, models: Mapping[str, keras.Model]) -> PeriodicAction:
    """Weights of every model and the last gradients of every phase."""

    def write(report: LoopReport) -> None:
        named = {f"weights/{name}/{v.path}": v
                 for name, model in models.items() for v in model.trainable_variables}
        for phase, gradients in report.output.gradients.items():
            named.update({f"gradients/{phase}/{path}": g for path, g in gradients.items()})
        summaries.write_histograms(named, step=report.step)

    return PeriodicAction(name="histograms", every=every, fn=write, needs_gradients=True)
