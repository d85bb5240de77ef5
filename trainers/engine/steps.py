"""One generic parameter update: tape, loss, gradients, optimizers.

Every phase of every setup goes through `make_replica_update`; the discriminator step and the
generator step of a GAN are two instances that differ only in the models they update and the
loss they minimise. Each update has its own `tf.GradientTape` and touches only the trainable
variables of its phase's models, each with the optimizer the phase names for its model (one for
all of them unless `Phase.optimizers` says otherwise).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping, NamedTuple, Sequence

import keras
import tensorflow as tf

from trainers.engine import privacy as privacy_lib
from trainers.engine.phases import (LossOutput, Phase, StepInputs, distinct_optimizers, model_loss_metric,
                                    optimizer_metric, phase_optimizer_names, update_metric_names)


class UpdateResult(NamedTuple):
    """What one update returns from replica context.

    `shares` are per-replica shares of global means (sum them over replicas); `replicated`
    values are identical on every replica (take any one); `gradients` are the all-reduced
    gradients of `phase_variables` (after clipping), identical on every replica, kept for
    histograms.
    """

    shares: Mapping[str, tf.Tensor]
    replicated: Mapping[str, tf.Tensor]
    gradients: list[tf.Tensor]


def phase_variables(phase: Phase, models: Mapping[str, keras.Model]) -> list[tf.Variable]:
    """The trainable variables a phase updates, in a fixed order."""
    return [variable for name in phase.models for variable in models[name].trainable_variables]


def uses_loss_scaling(optimizer: keras.optimizers.Optimizer) -> bool:
    """Whether `optimizer` scales the loss (mixed_float16): it then reports `loss_scale`."""
    return isinstance(optimizer, keras.optimizers.LossScaleOptimizer)


def reported_metrics(phase: Phase, optimizers: Mapping[str, keras.optimizers.Optimizer]) -> tuple[str, ...]:
    """Every metric name an update of `phase` reports, in a fixed order: ``loss``, the phase's
    declared metrics, then the rest of `phases.update_metric_names`.

    `optimizers` is keyed by optimizer name (it may hold other phases' optimizers too).
    """
    scaled = [name for name in distinct_optimizers(phase) if uses_loss_scaling(optimizers[name])]
    loss, *added = update_metric_names(phase, loss_scaled=scaled)
    return (loss, *phase.metrics, *added)


def replica_cond(condition: tf.Tensor, fn: Callable[..., None], *args: Any) -> None:
    """From replica context, runs ``fn(*args)`` on every replica when `condition`, else nothing.

    A `tf.cond` in replica context cannot contain a `merge_call` (every optimizer's `apply` holds
    one) under MirroredStrategy, so the decision is taken in cross-replica context, where `fn`
    re-enters replica context; this mirrors how Keras's LossScaleOptimizer skips non-finite
    steps. Every replica must agree on `condition` (the first one's is used). Replica-local
    values reach `fn` only through `args`, which give each replica its own.
    """
    def cross_replica(distribution, condition, args):
        def run_everywhere():
            distribution.extended.call_for_each_replica(fn, args=tuple(args))

        tf.cond(distribution.experimental_local_results(condition)[0], run_everywhere, lambda: None)

    tf.distribute.get_replica_context().merge_call(cross_replica, args=(condition, args))


def apply_if_finite(updates: Sequence[tuple[keras.optimizers.Optimizer, list, list]],
                    finite: tf.Tensor) -> None:
    """Applies every ``(optimizer, gradients, variables)`` only when `finite`, else none of them.

    The gradients are all-reduced, so every replica agrees on `finite`; the optimizers'
    `merge_call`s make this a `replica_cond`.
    """
    optimizers = [optimizer for optimizer, _, _ in updates]
    variables = [variables for _, _, variables in updates]

    def apply_all(gradients):
        for optimizer, grads, targets in zip(optimizers, gradients, variables):
            optimizer.apply(grads, targets)

    replica_cond(finite, apply_all, [grads for _, grads, _ in updates])


@dataclasses.dataclass(frozen=True, eq=False)
class UpdateLayout:
    """The static facts of one phase's update, derived and checked once (`update_layout`).

    `owners[i]` is, for variable i of `variables`, the optimizer that applies it and the model
    whose loss it follows (None: the phase's `loss`); `targets` are the distinct owners in
    order (one scaled loss each); `members` maps each applied optimizer to its variables'
    indices. `reached` is filled when the loss is traced (`gradients_of`): which variables the
    loss reaches, the only ones the update applies.
    """

    phase: Phase
    models: Mapping[str, keras.Model]
    optimizers: Mapping[str, keras.optimizers.Optimizer]
    global_batch_size: int
    num_replicas: int
    microbatches: int
    variables: list[tf.Variable]
    owners: list[tuple[str, str | None]]
    targets: list[tuple[str, str | None]]
    members: dict[str, list[int]]
    scaling: dict[str, bool]
    xla: bool = False  # the loss and gradients are XLA-compiled (`StepInputs.xla`)
    reached: list[bool] = dataclasses.field(default_factory=list)

    @property
    def replica_batch_size(self) -> int:
        return self.global_batch_size // self.num_replicas

    @property
    def applied(self) -> tuple[str, ...]:
        return distinct_optimizers(self.phase)


def update_layout(phase: Phase, *, models: Mapping[str, keras.Model],
                  optimizers: Mapping[str, keras.optimizers.Optimizer], global_batch_size: int,
                  num_replicas: int, xla: bool = False) -> UpdateLayout:
    """The `UpdateLayout` of `phase`; ValueError for missing optimizers, a batch that does not
    split over the replicas (or microbatches), or a private phase with loss scaling."""
    names = phase_optimizer_names(phase)
    missing = sorted(set(names) - set(optimizers))
    if missing:
        raise ValueError(f"Phase {phase.name!r} uses optimizers {missing}, which are not among "
                         f"{sorted(optimizers)}; key the optimizers by optimizer name.")
    microbatches = _microbatches(phase, global_batch_size, num_replicas)
    owners = [(optimizer, model if phase.per_model_losses else None)
              for model, optimizer in zip(phase.models, names)
              for _ in models[model].trainable_variables]
    applied = distinct_optimizers(phase)
    scaling = {name: uses_loss_scaling(optimizers[name]) for name in applied}
    layout = UpdateLayout(
        phase=phase, models=models, optimizers=optimizers, global_batch_size=global_batch_size,
        num_replicas=num_replicas, microbatches=microbatches,
        variables=phase_variables(phase, models), owners=owners,
        targets=list(dict.fromkeys(owners)),
        members={name: [i for i, (owner, _) in enumerate(owners) if owner == name] for name in applied},
        scaling=scaling, xla=xla)
    if phase.privacy and any(scaling.values()):
        raise ValueError(f"Phase {phase.name!r}: a private phase clips unscaled gradients; use "
                         "an optimizer without loss scaling (not mixed_float16).")
    return layout


def _microbatches(phase: Phase, global_batch_size: int, num_replicas: int) -> int:
    """Microbatches per global batch (1 for a phase without privacy), checked to split."""
    if global_batch_size % num_replicas:
        raise ValueError(
            f"Global batch {global_batch_size} is not divisible by {num_replicas} replicas.")
    privacy = phase.privacy
    microbatches = privacy.microbatches_of(global_batch_size) if privacy else 1
    if privacy and (global_batch_size % microbatches or microbatches % num_replicas):
        raise ValueError(f"Phase {phase.name!r}: {microbatches} microbatches must divide the "
                         f"global batch {global_batch_size} and split over {num_replicas} replicas.")
    return microbatches


def check_output(phase: Phase, output: LossOutput) -> None:
    """The loss returned exactly the phase's declared metrics and per-model losses."""
    if set(output.metrics) != set(phase.metrics):
        raise ValueError(
            f"Phase {phase.name!r} declares metrics {sorted(phase.metrics)} but its loss "
            f"returned {sorted(output.metrics)}; make Phase.metrics list exactly those.")
    expected = set(phase.models) if phase.per_model_losses else set()
    if set(output.model_losses) != expected:
        raise ValueError(
            f"Phase {phase.name!r} (per_model_losses={phase.per_model_losses}) got "
            f"model_losses for {sorted(output.model_losses)}; give one per model of "
            f"{list(phase.models)} with per_model_losses=True, or none without it.")


def gradients_of(layout: UpdateLayout, inputs: StepInputs, weight: float = 1.0):
    """(output, gradients of `weight` x the loss, dense, zeros where unreached).

    Each target (optimizer, loss) differentiates its own scaled loss with respect to its own
    variables, from one tape. Records `layout.reached`.
    """
    phase, optimizers = layout.phase, layout.optimizers
    with tf.GradientTape(persistent=len(layout.targets) > 1) as tape:
        output = phase.loss(layout.models, inputs)
        check_output(phase, output)
        # A weight of 1 is left out rather than multiplied (x * 1 is x): no op, and none in
        # the backward pass, per update.
        scaled = {(name, model): optimizers[name].scale_loss(
            _weighted(weight, output.loss if model is None else output.model_losses[model]))
            for name, model in layout.targets}
    gradients: list[tf.Tensor | None] = [None] * len(layout.variables)
    for target in layout.targets:
        indices = [i for i, owner in enumerate(layout.owners) if owner == target]
        sources = [layout.variables[i] for i in indices]
        for i, gradient in zip(indices, tape.gradient(scaled[target], sources)):
            gradients[i] = gradient
    del tape
    layout.reached[:] = [g is not None for g in gradients]
    _check_reached(layout)
    return output, _dense(gradients, layout.variables)


def _weighted(weight: float, loss: tf.Tensor) -> tf.Tensor:
    return loss if weight == 1 else weight * loss


def _check_reached(layout: UpdateLayout) -> None:
    """Every applied optimizer has at least one variable the loss reaches."""
    phase, names = layout.phase, phase_optimizer_names(layout.phase)
    for name in layout.applied:
        if not any(layout.reached[i] for i in layout.members[name]):
            models_of = [m for m, o in zip(phase.models, names) if o == name]
            raise ValueError(
                f"Phase {phase.name!r}: the loss depends on none of the variables of "
                f"{models_of}; a phase must update the models its loss uses.")


def _dense(gradients: list[tf.Tensor | None], variables: list[tf.Variable]) -> list[tf.Tensor]:
    """`gradients` as one list of dense tensors, zeros for the variables the loss misses.

    A variable the loss does not reach (the output bias under a gradient penalty alone) is left
    out of the update, as PyTorch optimizers skip parameters without a gradient; it counts as a
    zero gradient in the norm and the histograms. Embedding lookups give IndexedSlices, made
    dense because every later stage (all-reduce, norm, clipping, scaling, recorded histograms)
    treats the gradients as one list of tensors, and a GAN's embedding tables (one row per
    class) are small.
    """
    gradients = [tf.zeros_like(v) if g is None else g for g, v in zip(gradients, variables)]
    return [tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g for g in gradients]


def replica_inputs(layout: UpdateLayout, real, seed, cycle, replica_index) -> StepInputs:
    """This replica's `StepInputs`."""
    return StepInputs(
        real=real,
        seed=seed,
        global_batch_size=layout.global_batch_size,
        replica_batch_size=layout.replica_batch_size,
        replica_index=replica_index,
        cycle=cycle,
        xla=layout.xla,
    )


def loss_and_gradients(layout: UpdateLayout, real, seed, cycle, replica_index):
    """This replica's (loss share, metric shares, per-model loss shares, gradients)."""
    output, gradients = gradients_of(layout, replica_inputs(layout, real, seed, cycle, replica_index))
    return output.loss, dict(output.metrics), dict(output.model_losses), gradients


def private_loss_and_gradients(layout: UpdateLayout, real, seed, cycle, replica_index):
    """This replica's loss and metric shares and the sum of its microbatches' clipped gradients
    (`privacy.clip`), one microbatch per iteration of a `tf.while_loop`, after `Privacy.prepare`
    added its tensors to the replica's batch."""
    phase, global_batch_size = layout.phase, layout.global_batch_size
    prepare = phase.privacy.prepare
    if prepare is not None:
        whole = replica_inputs(layout, real, seed, cycle, replica_index)
        real = {**real, **prepare(layout.models, whole)}
    count = layout.microbatches // layout.num_replicas
    size = layout.replica_batch_size // count
    parts = tf.nest.map_structure(
        lambda x: tf.reshape(x, [count, size, *x.shape[1:]]), real)

    def body(index, loss, metrics, summed):
        inputs = StepInputs(
            real=tf.nest.map_structure(lambda x: tf.gather(x, index), parts), seed=seed,
            global_batch_size=global_batch_size, replica_batch_size=size,
            replica_index=replica_index * count + index, cycle=cycle, xla=layout.xla)
        # The loss is this microbatch's share of the global mean: x B / size is its mean.
        output, gradients = gradients_of(layout, inputs, global_batch_size / size)
        clipped = privacy_lib.clip(gradients, phase.privacy.l2_clip)
        return (index + 1, loss + output.loss,
                {key: metrics[key] + tf.cast(output.metrics[key], tf.float32) for key in metrics},
                [total + gradient for total, gradient in zip(summed, clipped)])

    start = (tf.constant(0), tf.constant(0.0), {key: tf.constant(0.0) for key in phase.metrics},
             [tf.zeros_like(v) for v in layout.variables])
    _, loss, metrics, summed = tf.while_loop(lambda index, *_: index < count, body, start)
    return loss, metrics, {}, summed


def current_replica_index(context: tf.distribute.ReplicaContext) -> int | tf.Tensor:
    """This replica's index: a Python int where the strategy knows it statically, so that
    compiled functions see static shapes (the replica's rows of the noise)."""
    static_index = tf.get_static_value(context.replica_id_in_sync_group)
    return (tf.cast(context.replica_id_in_sync_group, tf.int32)
            if static_index is None else int(static_index))


def losses_finite(loss: tf.Tensor, model_losses: Mapping[str, tf.Tensor]) -> tf.Tensor:
    """Whether the loss and every per-model loss are finite (a boolean tensor)."""
    finite = tf.math.is_finite(tf.cast(loss, tf.float32))
    for model_loss in model_losses.values():
        finite = tf.logical_and(finite, tf.math.is_finite(tf.cast(model_loss, tf.float32)))
    return finite


def clip_and_measure(layout: UpdateLayout, name: str, gradients: list[tf.Tensor],
                     finite: tf.Tensor) -> tuple[list[tf.Tensor], tf.Tensor, dict[str, tf.Tensor]]:
    """Optimizer `name`'s gradients (of the all-reduced `gradients`), clipped to
    `Phase.clip_norm`; `finite` and'ed with their norm's finiteness (unless the optimizer scales
    the loss: it skips overflowing steps itself); and its replicated metrics (grad_norm before
    clipping, learning_rate, loss_scale)."""
    phase, optimizer, scaling = layout.phase, layout.optimizers[name], layout.scaling[name]
    own = [gradients[i] for i in layout.members[name]]
    # Without loss scaling there is no scale to divide by: no op that divides by 1 per update.
    scale = tf.cast(optimizer.dynamic_scale, tf.float32) if scaling else None
    scaled_norm = tf.linalg.global_norm(own)
    norm = scaled_norm / scale if scaling else scaled_norm
    if not scaling:
        finite = tf.logical_and(finite, tf.math.is_finite(norm))
    if phase.clip_norm > 0:
        limit = phase.clip_norm * scale if scaling else tf.constant(phase.clip_norm, tf.float32)
        own, _ = tf.clip_by_global_norm(own, limit, use_norm=scaled_norm)
    # Under loss scaling an overflowed (skipped) step reports a norm of 0.
    reported_norm = tf.where(tf.math.is_finite(norm), norm, 0.0) if scaling else norm
    rate = tf.cast(optimizer.learning_rate, tf.float32)
    metrics = {optimizer_metric(phase, "grad_norm", name): reported_norm,
               optimizer_metric(phase, "learning_rate", name): rate}
    if scaling:
        metrics[optimizer_metric(phase, "loss_scale", name)] = scale
    return own, finite, metrics


def replica_update(layout: UpdateLayout, compute: Callable, real: Any, seed: tf.Tensor,
                   cycle: tf.Tensor | None = None) -> UpdateResult:
    """One update in replica context (see `make_replica_update`): `compute`s the loss and
    gradients, all-reduces (and, for a private phase, noises) the gradients, clips and measures
    them per optimizer, and applies them all when everything is finite.

    Gradients are all-reduced here rather than inside the optimizer so that the logged norm,
    the clipping and the finiteness check see the *global* gradient. Keras optimizers always
    all-reduce (sum) in replica context, so the already-reduced gradient is handed over divided
    by the replica count: the optimizer's sum restores it exactly for power-of-two counts.

    A NaN/Inf loss or gradient skips the update (counted in the `nonfinite` metric). With a
    `LossScaleOptimizer` an overflowing gradient is expected now and then: that optimizer
    itself skips its update and lowers its scale (the phase's other optimizers still apply
    theirs), so only a non-finite *loss* counts as `nonfinite` for it.
    """
    context = tf.distribute.get_replica_context()
    loss, metrics, model_losses, gradients = compute(real, seed, cycle, current_replica_index(context))
    gradients = context.all_reduce(tf.distribute.ReduceOp.SUM, gradients)
    if layout.phase.privacy:
        gradients = privacy_lib.noised_mean(gradients, seed, layout.phase.privacy, layout.microbatches)
    gradients = list(gradients)
    finite = losses_finite(loss, model_losses)
    replicated, updates = {}, []
    for name in layout.applied:
        indices = layout.members[name]
        clipped, finite, measured = clip_and_measure(layout, name, gradients, finite)
        for i, gradient in zip(indices, clipped):
            gradients[i] = gradient
        replicated.update(measured)
        applied = [i for i in indices if layout.reached[i]]
        # The division is skipped for one replica (x / 1 is x): one op per variable less.
        updates.append((layout.optimizers[name],
                        [gradients[i] / layout.num_replicas if layout.num_replicas > 1
                         else gradients[i] for i in applied],
                        [layout.variables[i] for i in applied]))
    apply_if_finite(updates, finite)
    shares = {"loss": loss, **metrics,
              **{model_loss_metric(m): value for m, value in model_losses.items()}}
    replicated["nonfinite"] = 1.0 - tf.cast(finite, tf.float32)
    return UpdateResult(shares=shares, replicated=replicated, gradients=gradients)


def make_replica_update(
    phase: Phase,
    *,
    models: Mapping[str, keras.Model],
    optimizers: Mapping[str, keras.optimizers.Optimizer],
    global_batch_size: int,
    num_replicas: int,
    jit_compile: bool = False,
    inside_xla: bool = False,
) -> Callable[..., UpdateResult]:
    """Builds the replica-context function ``update(real, seed, cycle=None) -> UpdateResult``.

    `optimizers` is keyed by optimizer name (`phases.phase_optimizer_names`); it may hold more
    than the phase uses. With several optimizers, each model's variables get the gradient of
    ITS optimizer's scaled loss: ``model_losses[model]`` when the phase has `per_model_losses`,
    else the phase's `loss`. All gradients are all-reduced in one call; each optimizer's are
    then measured, clipped (`Phase.clip_norm`) and applied on their own, but a non-finite value
    anywhere skips the whole update, so the models never drift apart by a half-applied step.

    Gradients are all-reduced, measured, clipped and applied by `replica_update`, which says
    how non-finite values skip the update.

    `jit_compile=True` compiles the loss and its gradients (every forward and backward pass of
    the update, noise draws included) with XLA. That is the largest piece XLA can take: the
    gradient all-reduce and the optimizers' updates (`merge_call`) are synchronisation points
    between replicas, which a function nested in `strategy.run` cannot contain, so they and the
    norm, clipping and finiteness check between them stay in the surrounding graph. For the
    same reason a loss whose models synchronise in the forward pass (synchronized batch norm)
    compiles only with one replica. XLA's random-number kernels differ from TensorFlow's, so
    the same seed draws different noise with and without XLA.
    """
    layout = update_layout(phase, models=models, optimizers=optimizers,
                           global_batch_size=global_batch_size, num_replicas=num_replicas,
                           xla=jit_compile or inside_xla)
    local = private_loss_and_gradients if phase.privacy else loss_and_gradients

    def compute(real, seed, cycle, replica_index):
        return local(layout, real, seed, cycle, replica_index)

    compiled = tf.function(compute, jit_compile=True) if jit_compile else compute

    def update(real: Any, seed: tf.Tensor, cycle: tf.Tensor | None = None) -> UpdateResult:
        return replica_update(layout, compiled, real, seed, cycle)

    return update
