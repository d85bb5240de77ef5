"""The periodic jobs a training run attaches to its controller.

Each builder returns a `PeriodicAction`; all of them write through the default summary
writer, which `training.train` sets.
"""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

import keras
import numpy as np
import tensorflow as tf

from trainers import sampling
from trainers.outputs import summaries
from trainers.engine.controller import LoopReport, PeriodicAction


def scalar_summaries() -> PeriodicAction:
    """Per-phase averages of the loop (losses, scores, gradient norms, learning rates) and speed."""

    def write(report: LoopReport) -> None:
        scalars = dict(report.output.metrics)
        scalars["perf/images_per_second"] = report.images_per_second
        summaries.write_scalars(scalars, step=report.step)

    return PeriodicAction(name="scalars", every=0, fn=write)


class _SampleWriter:
    """Draws the fixed-noise samples with one compiled function and writes them."""

    def __init__(self, *, sample, noise: tf.Tensor, kind: str, modes: np.ndarray | None,
                 tag: str = "samples", rows: int | None = None):
        self._sample = tf.function(sample)
        self._noise = noise
        self._kind = kind
        self._modes = modes
        self._tag = tag
        self._rows = rows

    @property
    def traces(self) -> int:
        """How often the sampling function was traced (1 for a whole run)."""
        return self._sample.experimental_get_tracing_count()

    def __call__(self, report: LoopReport) -> None:
        outputs = self._sample(self._noise).numpy()
        if self._kind == "points":
            summaries.write_scatter(self._tag, outputs, step=report.step, modes=self._modes)
        else:
            summaries.write_image_grid(self._tag, outputs, step=report.step, rows=self._rows)


def sample_summaries(*, every: int, sample, noise: tf.Tensor, kind: str,
                     modes: np.ndarray | None = None) -> PeriodicAction:
    """Samples from one fixed noise batch (the same all run long, so progress is visible).

    Images become a grid; 2-D points a scatter plot over the true modes.
    """
    writer = _SampleWriter(sample=sample, noise=noise, kind=kind, modes=modes)
    return PeriodicAction(name="samples", every=every, fn=writer)


def class_sample_summaries(*, every: int, sample_labeled, num_classes: int,
                           noise: tf.Tensor) -> PeriodicAction:
    """Images of a class-conditional setup as tag "samples_by_class": row r shows class r, and
    column c the fixed noise vector `noise[c]` for every class, so each column shows what
    changing only the label does.
    """
    grid_noise, labels = sampling.class_grid(noise, num_classes)
    writer = _SampleWriter(sample=lambda z: sample_labeled(z, labels), noise=grid_noise,
                           kind="image", modes=None, tag="samples_by_class", rows=num_classes)
    return PeriodicAction(name="samples_by_class", every=every, fn=writer)


def translation_summaries(*, every: int,
                          chains: Mapping[str, tuple[tf.Tensor, Sequence[Callable]]]) -> PeriodicAction:
    """Image-to-image progress: for each tag, fixed input images [N, H, W, C] and the models
    applied to them in turn, as one grid whose row 0 is the inputs and row i the output of the
    i-th model applied to row i - 1, so each column follows one image (CycleGAN: A, G(A),
    F(G(A))). Each chain runs as one compiled function.
    """

    def run_chain(images, models):
        rows = [images]
        for model in models:
            rows.append(model(rows[-1], training=False))
        return tf.concat(rows, axis=0)

    compiled = {tag: (images, tf.function(lambda x, models=tuple(models): run_chain(x, models)),
                      len(models) + 1)
                for tag, (images, models) in chains.items()}

    def write(report: LoopReport) -> None:
        for tag, (images, chain, rows) in compiled.items():
            summaries.write_image_grid(tag, chain(images).numpy(), step=report.step, rows=rows)

    return PeriodicAction(name="translations", every=every, fn=write)


def histogram_summaries(*, every: int, models: Mapping[str, keras.Model]) -> PeriodicAction:
    """Weights of every model and the last gradients of every phase."""

    def write(report: LoopReport) -> None:
        named = {f"weights/{name}/{v.path}": v
                 for name, model in models.items() for v in model.trainable_variables}
        for phase, gradients in report.output.gradients.items():
            named.update({f"gradients/{phase}/{path}": g for path, g in gradients.items()})
        summaries.write_histograms(named, step=report.step)

    return PeriodicAction(name="histograms", every=every, fn=write, needs_gradients=True)
