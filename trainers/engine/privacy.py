"""Differentially private updates (DP-SGD, Abadi et al. 2016) and the privacy they spend.

A phase with `Phase.privacy` is updated with the clipped, noised mean of its microbatch
gradients (`steps.make_replica_update` computes and clips them, one microbatch at a time):

    g = (sum over microbatches of clip(g_m, C) + N(0, (S C)^2)) / M

Under MirroredStrategy each replica sums the clipped gradients of its own microbatches, the
all-reduce sums them over replicas, and only then is the noise added: every replica draws it
from the same stateless key (the update's seed) and adds it to the same all-reduced sum, so all
replicas hold the same noisy gradient and the global batch got exactly one draw of std S*C (had
each replica added its own draw before the all-reduce, the sum would have std sqrt(R) S C). The
key is a function of (--seed, cycle, phase, repeat), so a resumed run draws the same noise.

One example changes one microbatch, whose clipped gradient moves the sum by at most C, so each
update is a Gaussian mechanism of noise multiplier S on the examples of its batch. `spent`
composes the updates made so far with Google's `dp-accounting` (the RDP accountant, as TF
Privacy's `compute_dp_sgd_privacy`), treating each shuffled batch of B out of N examples as
Poisson sampling with rate q = B / N, as TF Privacy does.
"""

from __future__ import annotations

from typing import Any, Sequence

import tensorflow as tf

from trainers.engine.phases import RNG_ALGORITHM, Phase, Privacy, updates_after

# Folded into the update's seed for the privacy noise: the losses use small salts.
NOISE_SALT = 0x5EED_D9


def clip(gradients: Sequence[tf.Tensor], l2_clip: float) -> list[tf.Tensor]:
    """`gradients` (one microbatch's, all variables) scaled to global L2 norm <= `l2_clip`."""
    clipped, _ = tf.clip_by_global_norm(list(gradients), l2_clip)
    return clipped


def noised_mean(summed: Sequence[tf.Tensor], seed: tf.Tensor, privacy: Privacy,
                microbatches: int) -> list[tf.Tensor]:
    """The private gradient from the global sum of clipped microbatch gradients: Gaussian noise
    of std ``noise_multiplier * l2_clip`` added to each entry, divided by `microbatches`.

    Pure in `seed`: every replica that calls it with the same seed and sum gets the same result.
    """
    key = tf.random.experimental.stateless_fold_in(seed, NOISE_SALT)
    stddev = privacy.noise_multiplier * privacy.l2_clip
    noised = []
    for index, gradient in enumerate(summed):
        noise = tf.random.stateless_normal(
            tf.shape(gradient), seed=tf.random.experimental.stateless_fold_in(key, index),
            stddev=stddev, dtype=gradient.dtype, alg=RNG_ALGORITHM)
        noised.append((gradient + noise) / microbatches)
    return noised


def epsilon(*, noise_multiplier: float, sampling_rate: float, steps: int, delta: float) -> float:
    """Epsilon at `delta` of `steps` Poisson-subsampled Gaussian mechanisms (RDP accountant)."""
    from dp_accounting import dp_event, rdp

    if steps == 0:
        return 0.0
    if noise_multiplier == 0:
        return float("inf")
    accountant = rdp.RdpAccountant()
    accountant.compose(dp_event.SelfComposedDpEvent(
        dp_event.PoissonSampledDpEvent(sampling_rate, dp_event.GaussianDpEvent(noise_multiplier)),
        steps))
    return float(accountant.get_epsilon(delta))


def spent(phases: Sequence[Phase], cycles: int, *, global_batch_size: int,
          num_examples: int, delta: float = 0.0) -> dict[str, Any] | None:
    """The privacy spent after `cycles` cycles (JSON-ready), or None when no phase is private.

    Counts the private phases' updates from the schedule (`phases.updates_after`), so a resumed
    run reports what the uninterrupted one would. `delta` 0 means 1 / `num_examples`. Several
    private phases must share one `Privacy` (they compose as one mechanism).
    """
    private = [phase for phase in phases if phase.privacy is not None]
    if not private:
        return None
    settings = {phase.privacy for phase in private}
    if len(settings) > 1:
        raise ValueError(f"Private phases with different settings {sorted(map(str, settings))} "
                         "cannot be accounted as one mechanism.")
    privacy = private[0].privacy
    counts = updates_after(phases, cycles)
    steps = sum(counts[phase.name] for phase in private)
    delta = delta or 1.0 / num_examples
    rate = min(1.0, global_batch_size / num_examples)
    return {"epsilon": epsilon(noise_multiplier=privacy.noise_multiplier, sampling_rate=rate,
                               steps=steps, delta=delta),
            "delta": delta, "noise_multiplier": privacy.noise_multiplier,
            "l2_clip": privacy.l2_clip, "sampling_rate": rate, "steps": steps,
            "microbatches": privacy.microbatches_of(global_batch_size)}
