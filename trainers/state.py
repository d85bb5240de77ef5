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
    """The models, their optimizers (one per phase) and the cycle counter.

    `step` counts completed cycles.
    """

    models: Mapping[str, keras.Model]
    optimizers: Mapping[str, keras.optimizers.Optimizer]
    step: tf.Variable

    @classmethod
    def create(cls, *, models, optimizers) -> "TrainingState":
        """A fresh state; create it outside the strategy scope (the step is host-side)."""
        return cls(
            models=dict(models),
            optimizers=dict(optimizers),
            step=tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step"),
        )

    def checkpoint(self) -> tf.train.Checkpoint:
        """A checkpoint object tracking the whole state."""
        seeds = {name: seed_generator_states(model) for name, model in self.models.items()}
        return tf.train.Checkpoint(
            step=self.step,
            models=dict(self.models),
            optimizers=dict(self.optimizers),
            seed_states={name: states for name, states in seeds.items() if states},
        )

    def is_finite(self) -> bool:
        """True when every model and optimizer variable is finite (safe to checkpoint)."""
        variables = [v for m in self.models.values() for v in m.variables]
        variables += [v for o in self.optimizers.values() for v in o.variables]
        return all(
            bool(tf.reduce_all(tf.math.is_finite(v)))
            for v in variables if tf.as_dtype(v.dtype).is_floating)
