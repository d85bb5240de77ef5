"""Everything a checkpoint holds, in one place.

Resuming bit-exactly needs more than weights: the optimizers' slots and counters, the global
step (cycles done; the schedule, the data position and every update's noise are functions of
it, see `phases.update_seed`), and Keras seed-generator states (dropout), which Keras 3 layers
do not expose to `tf.train.Checkpoint` on their own, so they are tracked here explicitly.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping

import keras
import tensorflow as tf

_SEED_STATE_SUFFIX = "seed_generator_state"


def seed_generator_states(model: keras.Model) -> list[tf.Variable]:
    """The Keras seed-generator state variables of `model` (named so by Keras 3)."""
    return [v for v in model.variables if v.path.endswith(_SEED_STATE_SUFFIX)]


@dataclasses.dataclass
class TrainingState:
    """The models, their optimizers (keyed by optimizer name, see `phases.Phase.optimizers`),
    the cycle counter, and the variables a setup adds to steer training.

    `step` counts completed cycles. `learning_rate_scales` multiply each optimizer's learning
    rate (a NaN rollback lowers them); `loss_weights` are read by losses inside the compiled step,
    so a callback can change them between loops without retracing.
    """

    models: Mapping[str, keras.Model]
    optimizers: Mapping[str, keras.optimizers.Optimizer]
    step: tf.Variable
    learning_rate_scales: Mapping[str, tf.Variable] = dataclasses.field(default_factory=dict)
    loss_weights: Mapping[str, tf.Variable] = dataclasses.field(default_factory=dict)

    @classmethod
    def create(cls, *, models, optimizers, learning_rate_scales=None, loss_weights=None) -> "TrainingState":
        """A fresh state; create it outside the strategy scope (the step is host-side)."""
        return cls(
            models=dict(models),
            optimizers=dict(optimizers),
            step=tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step"),
            learning_rate_scales=dict(learning_rate_scales or {}),
            loss_weights=dict(loss_weights or {}),
        )

    def checkpoint(self) -> tf.train.Checkpoint:
        """A checkpoint object tracking the whole state."""
        seeds = {name: seed_generator_states(model) for name, model in self.models.items()}
        return tf.train.Checkpoint(
            step=self.step,
            learning_rate_scales=dict(self.learning_rate_scales),
            loss_weights=dict(self.loss_weights),
            models=dict(self.models),
            optimizers=dict(self.optimizers),
            seed_states={name: states for name, states in seeds.items() if states},
        )

    def is_finite(self) -> bool:
        """True when every floating-point variable of the state is finite (safe to checkpoint)."""
        variables = [v for m in self.models.values() for v in m.variables]
        variables += [v for o in self.optimizers.values() for v in o.variables]
        variables += [*self.learning_rate_scales.values(), *self.loss_weights.values()]
        return all(
            bool(tf.reduce_all(tf.math.is_finite(v)))
            for v in variables if tf.as_dtype(v.dtype).is_floating)
