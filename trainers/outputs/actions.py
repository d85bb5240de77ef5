"""The periodic jobs a training run attaches to its controller.

Each builder returns a `PeriodicAction`; all of them write through the default summary
writer, which the train mode (`modes.train.train`) sets.
"""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

import keras
import numpy as np
import tensorflow as tf

from trainers.outputs import summaries
from trainers.engine import privacy
from trainers.engine.controller import LoopReport, PeriodicAction
from trainers.engine.phases import Phase


IMAGES_PER_SECOND = "perf/images_per_second"


def log_scalars(report: LoopReport, scalars: Mapping[str, float | tf.Tensor]) -> None:
    """Writes `scalars` at the loop's step and adds them to `report.logged` as the event file
    holds them (float32), so what later actions see is what TensorBoard shows."""
    summaries.write_scalars(scalars, step=report.step)
    report.logged.update({tag: float(np.asarray(value, np.float32))
                          for tag, value in scalars.items()})


def scalar_summaries() -> PeriodicAction:
    """Per-phase averages of the loop (losses, scores, gradient norms, learning rates) and speed."""

    def write(report: LoopReport) -> None:
        scalars = dict(report.output.metrics)
        scalars[IMAGES_PER_SECOND] = report.images_per_second
        log_scalars(report, scalars)

    return PeriodicAction(name="scalars", every=0, fn=write)


EPSILON = "privacy/epsilon"


def describe_privacy(spent: Mapping) -> str:
    """One line for people: the epsilon of `engine.privacy.spent` and what it was computed from."""
    return (f"Privacy spent: epsilon={spent['epsilon']:.4g} at delta={spent['delta']:.3g} "
            f"(noise multiplier {spent['noise_multiplier']:g}, L2 clip {spent['l2_clip']:g}, "
            f"sampling rate {spent['sampling_rate']:.4g}, {spent['steps']} private updates)")


def privacy_summaries(phases: Sequence[Phase], *, global_batch_size: int, num_examples: int,
                      delta: float) -> PeriodicAction:
    """`privacy/epsilon` of the private `phases` after every loop (`engine.privacy.spent`), and
    the privacy spent printed after the run's last loop."""

    def write(report: LoopReport) -> None:
        now = privacy.spent(phases, report.step, global_batch_size=global_batch_size,
                            num_examples=num_examples, delta=delta)
        log_scalars(report, {EPSILON: now["epsilon"]})
        if report.final:
            print(describe_privacy(now), flush=True)

    return PeriodicAction(name="privacy", every=0, fn=write)


class _SampleWriter:
    """Draws the fixed-noise samples with one compiled function and writes them."""

    def __init__(self, *, sample, noise: tf.Tensor, write: Callable[[np.ndarray, int], None]):
        self._sample = tf.function(sample)
        self._noise = noise
        self._write = write

    @property
    def traces(self) -> int:
        """How often the sampling function was traced (1 for a whole run)."""
        return self._sample.experimental_get_tracing_count()

    def __call__(self, report: LoopReport) -> None:
        self._write(self._sample(self._noise).numpy(), report.step)


def sample_summaries(*, name: str = "samples", every: int, sample, noise: tf.Tensor,
                     write: Callable[[np.ndarray, int], None]) -> PeriodicAction:
    """Samples from one fixed noise batch (the same all run long, so progress is visible),
    written by ``write(outputs, step)``: an image grid, a scatter plot, ..."""
    return PeriodicAction(name=name, every=every,
                          fn=_SampleWriter(sample=sample, noise=noise, write=write))


def image_grid_writer(tag: str, *, rows: int | None = None) -> Callable[[np.ndarray, int], None]:
    """``write(images, step)``: images [N, H, W, C] in [-1, 1] as one grid under `tag`."""
    return lambda images, step: summaries.write_image_grid(tag, images, step=step, rows=rows)


def scatter_writer(tag: str, *, modes: np.ndarray | None = None) -> Callable[[np.ndarray, int], None]:
    """``write(points, step)``: 2-D points over the true mode centres under `tag`."""
    return lambda points, step: summaries.write_scatter(tag, points, step=step, modes=modes)


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
