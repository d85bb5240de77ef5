"""Typed training phases and the pure schedule that orders them.

A *cycle* is the unit the global step counts. In each cycle every phase whose `every` divides
the cycle index runs `repeats` parameter updates, in list order. The classic GAN recipe is two
phases, ``discriminator`` (repeats=k) then ``generator`` (repeats=1); a setup with more models
is just a longer list. Because the schedule is a pure function of the cycle index, a run
resumed from a checkpointed step does exactly what the uninterrupted run would have done. The
Trainer and the Keras fit step both run it through `cycle.run_cycle`.

Example (WGAN, k=5): after 40 cycles the discriminator's optimizer has made 200 updates and
the generator's 40, and 200 real batches were drawn (only the discriminator phase uses data).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Collection, Mapping, Sequence

import tensorflow as tf


# Reported for every phase by the update step itself: `nonfinite` counts updates skipped
# because the loss or the gradient was NaN/Inf; `loss_scale` appears with a loss-scale optimizer.
# A phase that applies several optimizers reports "grad_norm_<optimizer>" etc. instead (see
# `update_metric_names`).
RESERVED_METRICS = ("loss", "grad_norm", "learning_rate", "nonfinite", "loss_scale")

# Philox, named rather than "auto_select": graph mode picks Philox on CPU and GPU anyway (same
# numbers), while inside an XLA-compiled update "auto_select" took 2.9 ms for a 64x100 draw on
# CPU against 0.16 ms with Philox (the 2-D toy's XLA step: 6.4 -> 2.1 ms per cycle).
RNG_ALGORITHM = "philox"


@dataclasses.dataclass(frozen=True)
class LossOutput:
    """What a phase loss returns, in replica context.

    `loss` and every value in `metrics` are this replica's *share* of a global-batch mean (use
    `StepInputs.mean`), so summing them over replicas gives the global value.

    `model_losses` (for a phase with ``per_model_losses=True``) maps each model of the phase to
    the share of the objective ITS variables minimise: several models then learn from one
    forward pass against different objectives (the simultaneous GAN update: D against the D
    loss, G against the G loss). Left empty, every variable of the phase follows `loss`.
    """

    loss: tf.Tensor
    metrics: Mapping[str, tf.Tensor] = dataclasses.field(default_factory=dict)
    model_losses: Mapping[str, tf.Tensor] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Privacy:
    """DP-SGD for one phase (`privacy.py`): each microbatch's gradient is clipped to L2 norm
    `l2_clip`, the clipped gradients are summed over the global batch, Gaussian noise of std
    ``noise_multiplier * l2_clip`` is added once, and the sum is divided by the number of
    microbatches. `microbatches` is that number for the global batch (0: one per example).

    `prepare` (optional) ``prepare(models, inputs) -> dict`` runs once per update on the
    replica's whole batch, outside the gradient tape; its tensors (one row per example) are
    added to `inputs.real` before the loss, and split into microbatches with it: what the
    private loss reads that does not come from the real examples (a GAN's fakes, made with
    batch statistics over the whole batch and synchronised across replicas, which a
    per-microbatch loop cannot contain). It is not part of the mechanism: two phases with equal
    numbers are one mechanism whatever they prepare (`privacy.spent`).
    """

    l2_clip: float
    noise_multiplier: float
    microbatches: int = 0
    prepare: Callable[[Mapping[str, Any], "StepInputs"], Mapping[str, tf.Tensor]] | None = (
        dataclasses.field(default=None, compare=False, repr=False))

    def __post_init__(self):
        if self.l2_clip <= 0 or self.noise_multiplier < 0 or self.microbatches < 0:
            raise ValueError(f"Privacy needs l2_clip > 0, noise_multiplier >= 0 and microbatches "
                             f">= 0; got {self}.")

    def microbatches_of(self, global_batch_size: int) -> int:
        """Microbatches per global batch: `microbatches`, or one per example."""
        return self.microbatches or global_batch_size


@dataclasses.dataclass(frozen=True)
class Phase:
    """One kind of parameter update.

    Attributes:
      name: unique name; also the summary prefix, and the optimizer's name unless `optimizers`
        says otherwise.
      models: names of the models whose trainable variables this phase updates. Models that
        the loss merely calls are not updated.
      optimizers: the optimizer name of each entry of `models` (same order); empty = one
        optimizer named after the phase for all of them. Several names make one update apply
        several optimizers (one per generator, or the simultaneous GAN's D and G optimizers);
        two phases naming the same optimizer share its slots and step count (a lazy
        regularization phase on the discriminator's optimizer).
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
        With several optimizers each one's gradients are clipped separately. The logged
        `grad_norm` is the norm before clipping.
      per_model_losses: the loss returns `LossOutput.model_losses`, one per model, and each
        model is differentiated against its own; they are reported as `loss_<model>`. Declared
        up front for the same reason as `metrics`.
      privacy: make every update differentially private (`Privacy`, `privacy.py`): the loss is
        then evaluated once per microbatch, so it must be a mean of per-example terms (no
        statistic across examples of the real batch); one optimizer, no loss scaling. A field
        of the phase, not a wrapper of its loss: DP changes how the update gets its gradient
        (a tape per microbatch, clipping before the all-reduce, noise after it), which the
        update step owns and a phase's loss cannot express; everything DP alone needs is in
        this one optional field.
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
    optimizers: tuple[str, ...] = ()
    per_model_losses: bool = False
    privacy: Privacy | None = None

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
        if len(set(self.models)) < len(self.models):
            raise ValueError(f"Phase {self.name!r} lists a model twice: {list(self.models)}.")
        if self.optimizers and len(self.optimizers) != len(self.models):
            raise ValueError(
                f"Phase {self.name!r}: optimizers={self.optimizers} must name one optimizer per "
                f"model of {self.models} (same order), or be empty for one named {self.name!r}.")
        for optimizer in self.optimizers:
            if not optimizer or "/" in optimizer:
                raise ValueError(f"Phase {self.name!r}: optimizer name {optimizer!r} must be "
                                 "non-empty and contain no '/'.")
        if self.privacy and (self.per_model_losses or len(distinct_optimizers(self)) > 1):
            raise ValueError(f"Phase {self.name!r}: a private phase applies one optimizer to one "
                             "loss; drop per_model_losses and the extra optimizers.")
        reserved = sorted(set(self.metrics) & (set(RESERVED_METRICS) | set(update_metric_names(self))))
        if reserved:
            raise ValueError(f"Phase {self.name!r}: metric names {reserved} are reserved: the "
                             "update step reports them itself.")


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
    xla: bool = False  # the loss runs inside an XLA-compiled function (`_draw` says why it matters)

    def _rows(self, draw: tf.Tensor) -> tf.Tensor:
        start = self.replica_index * self.replica_batch_size
        return draw[start:start + self.replica_batch_size]

    def _seed_for(self, salt: int) -> tf.Tensor:
        return tf.random.experimental.stateless_fold_in(self.seed, salt)

    def normal(self, shape: Sequence[int], *, salt: int = 0) -> tf.Tensor:
        """Standard normal draws of shape [replica_batch, *shape]; `salt` separates streams."""
        return self._rows(self._draw(tf.random.stateless_normal,
                                     tf.raw_ops.StatelessRandomNormalV2, shape, salt))

    def uniform(self, shape: Sequence[int], *, salt: int = 0) -> tf.Tensor:
        """Uniform [0, 1) draws of shape [replica_batch, *shape]; `salt` separates streams."""
        return self._rows(self._draw(tf.random.stateless_uniform,
                                     tf.raw_ops.StatelessRandomUniformV2, shape, salt))

    def _draw(self, stateless: Callable, raw: Callable, shape: Sequence[int],
              salt: int) -> tf.Tensor:
        """The global batch's Philox draws (float32) of a `tf.random.stateless_*` function and
        the raw op that computes it from a key and counter.

        In a graph, one StatelessRandomGetKeyCounter op derives the Philox key and counter
        from the seed: the same scrambling `tf.random.stateless_normal(alg="philox")` writes as
        ~20 small ops (the same numbers, tested), and small ops are most of a small model's
        cycle. Under XLA that op's kernel derives different keys, so a compiled update
        (`xla`) keeps TensorFlow's own path.
        """
        full = [self.global_batch_size, *shape]
        seed = self._seed_for(salt)
        if self.xla:
            return stateless(full, seed=seed, alg=RNG_ALGORITHM)
        key, counter = tf.raw_ops.StatelessRandomGetKeyCounter(seed=seed)
        return raw(shape=full, key=key, counter=counter, alg=tf.random.Algorithm.PHILOX.value)

    def share(self, batch_value: tf.Tensor) -> tf.Tensor:
        """This replica's share of a value computed over its own rows as a whole (a batch
        statistic): the value x replica batch / global batch, so the replicas' shares sum to
        the mean of their values (the value itself with one replica)."""
        return tf.cast(batch_value, tf.float32) * (self.replica_batch_size / self.global_batch_size)

    def mean(self, per_example: tf.Tensor) -> tf.Tensor:
        """This replica's share of the global mean of a per-example value.

        The value may also be per group of examples (a packed discriminator's logits: the
        replica batch split into equal groups); the mean is then over the global batch's groups.
        """
        if per_example.shape.rank == 0:
            raise ValueError(f"A per-example value needs at least one axis; got a scalar "
                             f"{per_example!r}.")
        rows = per_example.shape[0]
        global_rows = self.global_batch_size
        if rows is not None and rows != self.replica_batch_size:
            if rows == 0 or self.replica_batch_size % rows:
                raise ValueError(
                    f"A per-example value has {rows} rows, which do not split this replica's "
                    f"batch of {self.replica_batch_size} into equal groups.")
            global_rows = self.global_batch_size // (self.replica_batch_size // rows)
        # `tf.nn.compute_average_loss`'s arithmetic (sum, then divide_no_nan by the global
        # count) without its graph assertion on the count, a Python int: the assertion is ~10
        # ops that ran in every update of the compiled loop.
        return tf.math.divide_no_nan(tf.reduce_sum(tf.cast(per_example, tf.float32)),
                                     tf.constant(global_rows, tf.float32))


def autographed(phase: Phase) -> Phase:
    """`phase` with its setup's functions (loss, after_update, a private phase's prepare) as
    AutoGraph converts them when traced, as `strategy.run` converts the function it runs: they may use Python `if`
    and `for` on tensors. The engine's own code is written for graphs (`tf.cond`,
    `tf.while_loop`), and the compiled loop turns AutoGraph off (`Trainer`)."""
    def convert(fn):
        if fn is None:
            return None
        return tf.__internal__.autograph.tf_convert(fn, tf.__internal__.autograph.control_status_ctx())

    privacy = (None if phase.privacy is None
               else dataclasses.replace(phase.privacy, prepare=convert(phase.privacy.prepare)))
    return dataclasses.replace(phase, loss=convert(phase.loss), privacy=privacy,
                               after_update=convert(phase.after_update))


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


def phase_optimizer_names(phase: Phase) -> tuple[str, ...]:
    """The optimizer name of each model of `phase`, in `phase.models` order."""
    return phase.optimizers or (phase.name,) * len(phase.models)


def distinct_optimizers(phase: Phase) -> tuple[str, ...]:
    """The optimizers one update of `phase` applies, each once, in first-use order."""
    return tuple(dict.fromkeys(phase_optimizer_names(phase)))


def optimizer_metric(phase: Phase, key: str, optimizer: str) -> str:
    """The name under which an update of `phase` reports `key` of one of its optimizers.

    "grad_norm" etc. when the phase applies one optimizer (the usual case, whatever that
    optimizer's name), "grad_norm_<optimizer>" when it applies several.
    """
    return key if len(distinct_optimizers(phase)) == 1 else f"{key}_{optimizer}"


def model_loss_metric(model: str) -> str:
    """The name under which a phase with `per_model_losses` reports `model`'s loss."""
    return f"loss_{model}"


def update_metric_names(phase: Phase, loss_scaled: Collection[str] | None = None) -> tuple[str, ...]:
    """The metric names the update step itself reports for `phase`, in the order it reports them
    (`steps.reported_metrics` puts the phase's declared metrics after the first, ``loss``).

    Only the optimizers named in `loss_scaled` (those that scale the loss, under mixed_float16)
    report ``loss_scale``; None counts all of them, which gives every name the step may report:
    the names a declared metric may not take.
    """
    applied = distinct_optimizers(phase)
    scaled = applied if loss_scaled is None else [name for name in applied if name in loss_scaled]
    names = ["loss"]
    names += [model_loss_metric(m) for m in phase.models] if phase.per_model_losses else []
    names += [optimizer_metric(phase, key, name) for key in ("grad_norm", "learning_rate")
              for name in applied]
    names.append("nonfinite")
    names += [optimizer_metric(phase, "loss_scale", name) for name in scaled]
    return tuple(names)


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


def runs_in_cycle(phase: Phase, cycle: int | tf.Tensor) -> bool | tf.Tensor:
    """Whether `phase` runs in the cycle with 0-based index `cycle`.

    `cycle` may be a Python int or a scalar integer tensor (the compiled step's cycle); the
    answer is then a boolean tensor, except for a phase that runs every cycle: that is `True`
    without reading the cycle, so the compiled step holds no condition for it.
    """
    return phase.every == 1 or cycle % phase.every == 0


def _cycles_run(phase: Phase, cycles: int) -> int:
    """Cycles among 0..cycles-1 in which `phase` runs (a multiple-of-`every` count)."""
    return -(-cycles // phase.every) if cycles > 0 else 0


def updates_after(phases: Sequence[Phase], cycles: int) -> dict[str, int]:
    """Parameter updates each phase has made after `cycles` complete cycles."""
    return {phase.name: phase.repeats * _cycles_run(phase, cycles) for phase in phases}


def optimizer_models(phases: Sequence[Phase]) -> dict[str, tuple[str, ...]]:
    """Optimizer name -> the models it updates over all phases (build its slots on those)."""
    owned: dict[str, dict[str, None]] = {}
    for phase in phases:
        for model, name in zip(phase.models, phase_optimizer_names(phase)):
            owned.setdefault(name, {})[model] = None
    return {name: tuple(models) for name, models in owned.items()}


def optimizer_updates_after(phases: Sequence[Phase], cycles: int) -> dict[str, int]:
    """Updates each optimizer has applied after `cycles` cycles (its `iterations`).

    An update applies each of its phase's optimizers once; an optimizer that several phases
    name counts the updates of all of them (learning-rate schedules span that total).
    """
    counts: dict[str, int] = {}
    for phase, updates in zip(phases, updates_after(phases, cycles).values()):
        for name in distinct_optimizers(phase):
            counts[name] = counts.get(name, 0) + updates
    return counts


def batches_after(phases: Sequence[Phase], cycles: int) -> int:
    """Real (global) batches drawn after `cycles` cycles: where a resumed input must restart."""
    return sum(phase.repeats * _cycles_run(phase, cycles) for phase in phases if phase.uses_data)
