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

from trainers.phases import Phase, StepInputs


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


def make_replica_update(
    phase: Phase,
    *,
    models: Mapping[str, keras.Model],
    optimizer: keras.optimizers.Optimizer,
    global_batch_size: int,
    num_replicas: int,
) -> Callable[[Any, tf.Tensor], UpdateResult]:
    """Builds the replica-context function ``update(real, seed) -> UpdateResult``.

    Gradients are all-reduced here rather than inside the optimizer so that the logged norm is
    the norm of the *global* gradient. Keras optimizers always all-reduce (sum) in replica
    context, so the already-reduced gradient is handed over divided by the replica count: the
    optimizer's sum restores it exactly for power-of-two replica counts.
    """
    variables = phase_variables(phase, models)
    if global_batch_size % num_replicas:
        raise ValueError(
            f"Global batch {global_batch_size} is not divisible by {num_replicas} replicas.")
    replica_batch_size = global_batch_size // num_replicas

    def update(real: Any, seed: tf.Tensor) -> UpdateResult:
        context = tf.distribute.get_replica_context()
        inputs = StepInputs(
            real=real,
            seed=seed,
            global_batch_size=global_batch_size,
            replica_batch_size=replica_batch_size,
            replica_index=tf.cast(context.replica_id_in_sync_group, tf.int32),
        )
        with tf.GradientTape() as tape:
            output = phase.loss(models, inputs)
            scaled_loss = optimizer.scale_loss(output.loss)
        if set(output.metrics) != set(phase.metrics):
            raise ValueError(
                f"Phase {phase.name!r} declares metrics {sorted(phase.metrics)} but its loss "
                f"returned {sorted(output.metrics)}; make Phase.metrics list exactly those.")
        gradients = tape.gradient(scaled_loss, variables)
        missing = [v.path for v, g in zip(variables, gradients) if g is None]
        if missing:
            raise ValueError(
                f"Phase {phase.name!r}: the loss does not depend on {missing}; every variable "
                "of the models a phase updates must receive a gradient.")
        gradients = context.all_reduce(tf.distribute.ReduceOp.SUM, gradients)
        optimizer.apply([g / num_replicas for g in gradients], variables)
        shares = {"loss": output.loss, **output.metrics}
        replicated = {
            "grad_norm": tf.linalg.global_norm(gradients),
            "learning_rate": tf.cast(optimizer.learning_rate, tf.float32),
        }
        return UpdateResult(shares=shares, replicated=replicated, gradients=gradients)

    return update
