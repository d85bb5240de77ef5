"""One generic parameter update: tape, loss, gradients, optimizer.

Every phase of every setup goes through `make_replica_update`; the discriminator step and the
generator step of a GAN are two instances that differ only in the models they update and the
loss they minimise. Each update has its own `tf.GradientTape` and its own optimizer and
touches only the trainable variables of its phase's models.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, NamedTuple

import keras
import tensorflow as tf

from trainers.phases import LossOutput, Phase, StepInputs


class UpdateResult(NamedTuple):
    """What one update returns from replica context.

    `shares` are per-replica shares of global means (sum them over replicas); `replicated`
    values are identical on every replica (take any one); `gradients` are the all-reduced
    gradients, identical on every replica, kept for histograms.
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


def reported_metrics(phase: Phase, optimizer: keras.optimizers.Optimizer) -> tuple[str, ...]:
    """Every metric name an update of `phase` reports, in a fixed order."""
    names = ("loss", *phase.metrics, "grad_norm", "learning_rate", "nonfinite")
    return names + (("loss_scale",) if uses_loss_scaling(optimizer) else ())


def apply_if_finite(optimizer, gradients, variables, finite: tf.Tensor) -> None:
    """Applies the update only when `finite`; a skipped update leaves every variable untouched.

    The decision is taken in cross-replica context (the gradients are all-reduced, so every
    replica agrees) because a `tf.cond` in replica context cannot contain the optimizer's
    `merge_call`; this mirrors how Keras's LossScaleOptimizer skips non-finite steps.
    """

    def cross_replica(distribution, gradients, finite):
        agreed = distribution.experimental_local_results(finite)[0]

        def apply():
            distribution.extended.call_for_each_replica(
                lambda g: optimizer.apply(g, variables), args=(gradients,))
            return tf.no_op()

        tf.cond(agreed, apply, tf.no_op)

    tf.distribute.get_replica_context().merge_call(cross_replica, args=(gradients, finite))


def make_replica_update(
    phase: Phase,
    *,
    models: Mapping[str, keras.Model],
    optimizer: keras.optimizers.Optimizer,
    global_batch_size: int,
    num_replicas: int,
    jit_compile: bool = False,
) -> Callable[..., UpdateResult]:
    """Builds the replica-context function ``update(real, seed, cycle=None) -> UpdateResult``.

    Gradients are all-reduced here rather than inside the optimizer so that the logged norm,
    the clipping and the finiteness check see the *global* gradient. Keras optimizers always
    all-reduce (sum) in replica context, so the already-reduced gradient is handed over divided
    by the replica count: the optimizer's sum restores it exactly for power-of-two counts.

    A NaN/Inf loss or gradient skips the update (counted in the `nonfinite` metric). With a
    `LossScaleOptimizer` an overflowing gradient is expected now and then: the optimizer itself
    skips that update and lowers its scale, so only a non-finite *loss* counts as `nonfinite`.

    `jit_compile=True` compiles the loss and its gradients (every forward and backward pass of
    the update, noise draws included) with XLA. That is the largest piece XLA can take: the
    gradient all-reduce and the optimizer's update (`merge_call`) are synchronisation points
    between replicas, which a function nested in `strategy.run` cannot contain, so they and the
    norm, clipping and finiteness check between them stay in the surrounding graph. For the
    same reason a loss whose models synchronise in the forward pass (synchronized batch norm)
    compiles only with one replica. XLA's random-number kernels differ from TensorFlow's, so
    the same seed draws different noise with and without XLA.
    """
    variables = phase_variables(phase, models)
    if global_batch_size % num_replicas:
        raise ValueError(
            f"Global batch {global_batch_size} is not divisible by {num_replicas} replicas.")
    replica_batch_size = global_batch_size // num_replicas
    loss_scaling = uses_loss_scaling(optimizer)
    # Which variables the loss reaches is known once it is traced; the update applies only those.
    reached: list[bool] = []

    def loss_and_gradients(real, seed, cycle, replica_index):
        inputs = StepInputs(
            real=real,
            seed=seed,
            global_batch_size=global_batch_size,
            replica_batch_size=replica_batch_size,
            replica_index=replica_index,
            cycle=cycle,
        )
        with tf.GradientTape() as tape:
            output = phase.loss(models, inputs)
            scaled_loss = optimizer.scale_loss(output.loss)
        if set(output.metrics) != set(phase.metrics):
            raise ValueError(
                f"Phase {phase.name!r} declares metrics {sorted(phase.metrics)} but its loss "
                f"returned {sorted(output.metrics)}; make Phase.metrics list exactly those.")
        gradients = tape.gradient(scaled_loss, variables)
        reached[:] = [g is not None for g in gradients]
        if not any(reached):
            raise ValueError(
                f"Phase {phase.name!r}: the loss depends on none of the variables of "
                f"{list(phase.models)}; a phase must update the models its loss uses.")
        # A variable the loss does not reach (the output bias under a gradient penalty alone)
        # is left out of the update, as PyTorch optimizers skip parameters without a gradient;
        # it counts as a zero gradient in the norm and the histograms.
        gradients = [tf.zeros_like(v) if g is None else g for g, v in zip(gradients, variables)]
        return output.loss, dict(output.metrics), gradients

    compute = tf.function(loss_and_gradients, jit_compile=True) if jit_compile else loss_and_gradients

    def update(real: Any, seed: tf.Tensor, cycle: tf.Tensor | None = None) -> UpdateResult:
        context = tf.distribute.get_replica_context()
        # A Python int where the strategy knows it statically, so that compiled functions see
        # static shapes (the replica's rows of the noise).
        static_index = tf.get_static_value(context.replica_id_in_sync_group)
        replica_index = (tf.cast(context.replica_id_in_sync_group, tf.int32)
                         if static_index is None else int(static_index))
        loss, metrics, gradients = compute(real, seed, cycle, replica_index)
        output = LossOutput(loss=loss, metrics=metrics)
        gradients = context.all_reduce(tf.distribute.ReduceOp.SUM, gradients)
        scale = tf.cast(optimizer.dynamic_scale, tf.float32) if loss_scaling else tf.constant(1.0)
        scaled_norm = tf.linalg.global_norm(gradients)
        norm = scaled_norm / scale
        loss_finite = tf.math.is_finite(tf.cast(output.loss, tf.float32))
        finite = loss_finite if loss_scaling else tf.logical_and(loss_finite, tf.math.is_finite(norm))
        if phase.clip_norm > 0:
            gradients, _ = tf.clip_by_global_norm(
                gradients, phase.clip_norm * scale, use_norm=scaled_norm)
        learning_rate = tf.cast(optimizer.learning_rate, tf.float32)  # the rate this update uses
        apply_if_finite(optimizer, [g / num_replicas for g, r in zip(gradients, reached) if r],
                        [v for v, r in zip(variables, reached) if r], finite)
        shares = {"loss": output.loss, **output.metrics}
        replicated = {
            # Under loss scaling an overflowed (skipped) step reports a norm of 0.
            "grad_norm": tf.where(tf.math.is_finite(norm), norm, 0.0) if loss_scaling else norm,
            "learning_rate": learning_rate,
            "nonfinite": 1.0 - tf.cast(finite, tf.float32),
        }
        if loss_scaling:
            replicated["loss_scale"] = scale
        return UpdateResult(shares=shares, replicated=replicated, gradients=gradients)

    return update
