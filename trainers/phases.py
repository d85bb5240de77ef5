"""Typed training phases and the pure schedule that orders them.

A *cycle* is the unit the global step counts. In each cycle every phase whose `every` divides
the cycle index runs `repeats` parameter updates, in list order. The classic GAN recipe is two
phases, ``discriminator`` (repeats=k) then ``generator`` (repeats=1); a setup with more models
is just a longer list. Because the schedule is a pure function of the cycle index, a run
resumed from a checkpointed step does exactly what the uninterrupted run would have done.

Example (WGAN, k=5): after 40 cycles the discriminator's optimizer has made 200 updates and
the generator's 40, and 200 real batches were drawn (only the discriminator phase uses data).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping, Sequence

import tensorflow as tf


# Reported for every phase by the update step itself: `nonfinite` counts updates skipped
# because the loss or the gradient was NaN/Inf; `loss_scale` appears with a loss-scale optimizer.
RESERVED_METRICS = ("loss", "grad_norm", "learning_rate", "nonfinite", "loss_scale")


@dataclasses.dataclass(frozen=True)
class LossOutput:
    """What a phase loss returns, in replica context.

    `loss` and every value in `metrics` are this replica's *share* of a global-batch mean (use
    `StepInputs.mean`), so summing them over replicas gives the global value.
    """

    loss: tf.Tensor
    metrics: Mapping[str, tf.Tensor] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Phase:
    """One kind of parameter update.

    Attributes:
      name: unique name; also the summary prefix and the optimizer's key.
      models: names of the models whose trainable variables this phase updates. Models that
        the loss merely calls are not updated.
      loss: ``loss(models, inputs) -> LossOutput`` evaluated under the phase's gradient tape.
      metrics: the names of the extra metrics the loss reports (besides ``loss``). Declared up
        front so the compiled loop's accumulators exist before it is traced (a variable
        created while tracing makes `tf.function` trace twice); checked at trace time.
      repeats: updates per cycle (k in k:1 alternation).
      every: the phase runs on cycles whose index is a multiple of `every` (lazy phases).
      uses_data: whether each update draws a fresh real batch from the input iterator.
      after_update: optional ``fn(models, cycle)`` run in cross-replica context after each
        update, with the 0-based cycle index as a tensor (WGAN weight clipping, generator EMA).
      clip_norm: clip the (global) gradient to this global norm before applying it; 0 = off.
        The logged `grad_norm` is the norm before clipping.
    """

    name: str
    models: tuple[str, ...]
    loss: Callable[[Mapping[str, Any], "StepInputs"], LossOutput]
    metrics: tuple[str, ...] = ()
    repeats: int = 1
    every: int = 1
    uses_data: bool = True
    after_update: Callable[[Mapping[str, Any], tf.Tensor], None] | None = None
    clip_norm: float = 0.0

    def __post_init__(self):
        if not self.name or "/" in self.name:
            raise ValueError(f"Phase name {self.name!r} must be non-empty and contain no '/'.")
        if not self.models:
            raise ValueError(f"Phase {self.name!r} updates no model: give at least one name.")
        if self.repeats < 1:
            raise ValueError(f"Phase {self.name!r}: repeats={self.repeats} must be >= 1.")
        if self.every < 1:
            raise ValueError(f"Phase {self.name!r}: every={self.every} must be >= 1.")
        if self.clip_norm < 0:
            raise ValueError(f"Phase {self.name!r}: clip_norm={self.clip_norm} must be >= 0 (0 = off).")
        reserved = sorted(set(self.metrics) & set(RESERVED_METRICS))
        if reserved:
            raise ValueError(f"Phase {self.name!r}: metric names {reserved} are reserved.")


@dataclasses.dataclass(frozen=True)
class StepInputs:
    """Everything a phase loss may read besides the models, in replica context.

    Randomness comes from `seed` (identical on every replica) through stateless ops: noise is
    drawn for the *global* batch and each replica takes its own rows, so the numbers a loss
    sees do not depend on how many replicas share the batch. `cycle` (the 0-based cycle index,
    a tensor) lets a loss schedule its weights inside the compiled step without retracing.
    """

    real: Any
    seed: tf.Tensor
    global_batch_size: int
    replica_batch_size: int
    replica_index: tf.Tensor
    cycle: tf.Tensor | None = None

    def _rows(self, draw: tf.Tensor) -> tf.Tensor:
        start = self.replica_index * self.replica_batch_size
        return draw[start:start + self.replica_batch_size]

    def _seed_for(self, salt: int) -> tf.Tensor:
        return tf.random.experimental.stateless_fold_in(self.seed, salt)

    def normal(self, shape: Sequence[int], *, salt: int = 0) -> tf.Tensor:
        """Standard normal draws of shape [replica_batch, *shape]; `salt` separates streams."""
        draw = tf.random.stateless_normal([self.global_batch_size, *shape], seed=self._seed_for(salt))
        return self._rows(draw)

    def uniform(self, shape: Sequence[int], *, salt: int = 0) -> tf.Tensor:
        """Uniform [0, 1) draws of shape [replica_batch, *shape]; `salt` separates streams."""
        draw = tf.random.stateless_uniform([self.global_batch_size, *shape], seed=self._seed_for(salt))
        return self._rows(draw)

    def mean(self, per_example: tf.Tensor) -> tf.Tensor:
        """This replica's share of the global-batch mean of a per-example value."""
        return tf.nn.compute_average_loss(
            tf.cast(per_example, tf.float32), global_batch_size=self.global_batch_size)


def update_seed(seed: int, cycle: tf.Tensor, phase_index: int, repeat: int) -> tf.Tensor:
    """The stateless RNG key of one update: a pure function of (--seed, cycle, phase, repeat).

    Deriving every update's noise from the step rather than from a stateful generator makes a
    resumed run draw exactly the numbers the uninterrupted run drew, with nothing random to
    checkpoint, and gives every replica and every worker the same key without communication.
    """
    key = tf.constant([seed, 0], dtype=tf.int64)
    for data in (tf.cast(cycle, tf.int64), phase_index, repeat):
        key = tf.random.experimental.stateless_fold_in(key, tf.cast(data, tf.int64))
    return key


def validate_phases(phases: Sequence[Phase], model_names: Sequence[str]) -> None:
    """Rejects duplicate phase names and phases that update unknown models."""
    if not phases:
        raise ValueError("A setup needs at least one phase.")
    names = [phase.name for phase in phases]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ValueError(f"Phase names must be unique; repeated: {duplicates}.")
    for phase in phases:
        unknown = sorted(set(phase.models) - set(model_names))
        if unknown:
            raise ValueError(
                f"Phase {phase.name!r} updates unknown models {unknown}; known: {sorted(model_names)}.")


def runs_in_cycle(phase: Phase, cycle: int) -> bool:
    """Whether `phase` runs in the cycle with 0-based index `cycle`."""
    return cycle % phase.every == 0


def cycle_plan(phases: Sequence[Phase], cycle: int) -> list[tuple[str, int]]:
    """The ordered (phase name, repeat index) updates of one cycle."""
    return [(phase.name, repeat) for phase in phases if runs_in_cycle(phase, cycle)
            for repeat in range(phase.repeats)]


def _cycles_run(phase: Phase, cycles: int) -> int:
    """Cycles among 0..cycles-1 in which `phase` runs (a multiple-of-`every` count)."""
    return -(-cycles // phase.every) if cycles > 0 else 0


def updates_after(phases: Sequence[Phase], cycles: int) -> dict[str, int]:
    """Parameter updates each phase has made after `cycles` complete cycles."""
    return {phase.name: phase.repeats * _cycles_run(phase, cycles) for phase in phases}


def batches_after(phases: Sequence[Phase], cycles: int) -> int:
    """Real (global) batches drawn after `cycles` cycles: where a resumed input must restart."""
    return sum(phase.repeats * _cycles_run(phase, cycles) for phase in phases if phase.uses_data)
