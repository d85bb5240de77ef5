"""Gantry's Keras callbacks for `AdversarialModel.fit` (see `trainers.fit.model`)."""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from trainers.outputs import summaries


class ImageGridCallback(keras.callbacks.Callback):
    """Writes a grid of samples from fixed noise to TensorBoard every `every` epochs.

    The same noise every time makes frames comparable: changes between them are the
    generator's. The grid is written after epochs `every`, 2 * `every`, ... at step = the
    0-based epoch index, the step Keras's TensorBoard callback gives its "epoch_*" scalars.
    The callback owns its file writer (in `log_dir`, e.g. the TensorBoard callback's log_dir
    plus "/samples") and flushes after each grid, so an interrupted fit keeps what was written.

    Args:
      log_dir: directory for the event files.
      noise: fixed latent batch [N, *latent_shape] handed to `model.sample`; None: `num_samples`
        vectors of the model's `latent_shape`, drawn from `seed` when training begins.
      num_samples: how many samples the grid shows when `noise` is None.
      seed: the seed of that noise.
      every: period in epochs (>= 1).
      tag: summary tag of the grid.
      rows: grid rows; None lays the grid out as square as possible.
    """

    def __init__(self, log_dir: str, *, noise=None, num_samples: int = 64, seed: int = 0,
                 every: int = 1, tag: str = "samples", rows: int | None = None):
        super().__init__()
        if every < 1:
            raise ValueError(f"every={every} must be >= 1 (epochs between grids).")
        self.log_dir = log_dir
        self.noise = None if noise is None else tf.convert_to_tensor(noise, tf.float32)
        self.num_samples = num_samples
        self.seed = seed
        self.every = every
        self.tag = tag
        self.rows = rows
        self._writer = None

    def on_train_begin(self, logs=None):
        if self.noise is None:
            self.noise = tf.random.stateless_normal([self.num_samples, *self.model.latent_shape],
                                                    seed=[self.seed, 0])
        self._writer = tf.summary.create_file_writer(self.log_dir)

    def on_epoch_end(self, epoch, logs=None):
        if (epoch + 1) % self.every:
            return
        with self._writer.as_default():
            summaries.write_image_grid(self.tag, self.model.sample(self.noise), step=epoch,
                                       rows=self.rows)
        self._writer.flush()

    def on_train_end(self, logs=None):
        self._writer.close()
        self._writer = None


class ReduceLROnPlateauAll(keras.callbacks.ReduceLROnPlateau):
    """Keras's ReduceLROnPlateau for every phase, whether its learning rate is a float or a schedule.

    `model.optimizer` is a group of the phase optimizers, so Keras's own callback already
    lowers every float learning rate. Gantry's preset optimizers use a schedule instead, which
    Keras refuses to set; for such a phase this subclass lowers its `model.learning_rate_scales`
    variable instead, so the current rate is multiplied by `factor` (never below `min_lr`) and
    the schedule keeps its shape from there. Arguments are Keras's; give `mode=` explicitly.
    """

    def _reduce_optimizer_lr(self, optimizer, epoch, name=""):
        scale = self.model.learning_rate_scales.get(name)
        if scale is None:
            return super()._reduce_optimizer_lr(optimizer, epoch, name)
        current = float(keras.ops.convert_to_numpy(optimizer.learning_rate))
        if current <= np.float32(self.min_lr):
            return False
        lowered = max(current * self.factor, self.min_lr)
        scale.assign(scale * lowered / current)
        if self.verbose > 0:
            print(f"\nEpoch {epoch + 1}: ReduceLROnPlateauAll reducing {name} learning rate "
                  f"to {lowered}.")
        return True
