"""Learning-rate, loss-weight and optimizer schedules: pure functions of the update or cycle index.

They are evaluated inside the compiled step from counters (the optimizer's `iterations`, the
global cycle), so a schedule never retraces the step and a resumed run continues the schedule
exactly where it stopped. The one input that is not a counter is a timed run's share of
`--train_time` used, for a decaying rate whose end only the clock knows.
"""

from __future__ import annotations

import math

import keras
import tensorflow as tf

from trainers.config.choices import LEARNING_RATE_SCHEDULES


# The schedules that reach 0 at the run's end, so need to know where it is.
ENDING_SCHEDULES = ("linear", "cosine")


def learning_rate_factor(kind: str, step, *, total: int | None, warmup: int = 0, hold: int = 0,
                         time_progress=None) -> tf.Tensor:
    """The multiplier of the base learning rate at 0-based update `step`.

    constant: 1; linear: decays linearly from 1 to 0 as the run progresses; cosine: half a
    cosine from 1 to 0. The run's progress is `step / total`, or under a time budget the share
    of `--train_time` used (`time_progress`, in [0, 1]), whichever is further: a run ends at
    whichever limit comes first, so the rate reaches 0 there. With neither a `total` nor a
    `time_progress` (no end known) these two are undefined.

    inverse_sqrt: 1 for the first `hold` updates, then sqrt(hold / (step + 1)) (Vaswani et al.
    2017 decay this way after their warm-up). It reads no end, so neither `total` nor
    `time_progress` changes it: a run of at most `hold` updates trains at the constant rate, a
    longer one at a rate that keeps falling, more slowly the longer it runs (a quarter of the
    rate at 16 x hold), and extending a run does not raise it again.

    A warm-up of `warmup` updates ramps linearly from 1/warmup to 1 first (the first update
    already moves), multiplied with the shape.
    """
    if kind not in LEARNING_RATE_SCHEDULES:
        raise ValueError(f"Unknown learning-rate schedule {kind!r}; use one of "
                         f"{', '.join(LEARNING_RATE_SCHEDULES)}.")
    if total is None and time_progress is None and kind in ENDING_SCHEDULES:
        raise ValueError(f"a {kind} schedule decays to 0 at the run's end, which neither a total "
                         "nor a time progress gives.")
    if total is not None and total < 1:
        raise ValueError(f"total={total} updates must be >= 1.")
    if kind == "inverse_sqrt" and hold < 1:
        raise ValueError(f"an inverse_sqrt schedule holds its rate for hold={hold} updates, "
                         "which must be >= 1.")
    step = tf.cast(step, tf.float32)
    if kind == "constant":
        shape = tf.ones_like(step)
    elif kind == "inverse_sqrt":
        shape = tf.sqrt(float(hold) / tf.maximum(float(hold), step + 1.0))
    else:
        progress = run_progress(step, total=total, time_progress=time_progress)
        shape = (1.0 - progress if kind == "linear"
                 else 0.5 * (1.0 + tf.cos(math.pi * progress)))
    if warmup > 0:
        shape = shape * tf.minimum(1.0, (step + 1.0) / float(warmup))
    return shape


def run_progress(step, *, total: int | None, time_progress=None) -> tf.Tensor:
    """How far the run is at 0-based `step` (an update or a cycle), 0 to 1: `step / total`, or
    under a time budget the share of `--train_time` used (`time_progress`), whichever is
    further, since a run ends at whichever limit comes first. ValueError with neither."""
    if total is None and time_progress is None:
        raise ValueError("a run's progress needs its total or its time progress; neither given.")
    step = tf.cast(step, tf.float32)
    progress = tf.zeros_like(step) if total is None else step / float(total)
    if time_progress is not None:
        progress = tf.maximum(progress, tf.cast(time_progress, tf.float32))
    return tf.clip_by_value(progress, 0.0, 1.0)


def cosine_between(progress, start, end) -> tf.Tensor:
    """`start` at progress 0 moving along a half cosine to `end` at progress 1 (R3GAN's
    schedules of learning rate, Adam's beta_2, gamma and the EMA half-life): flat at both ends,
    fastest halfway."""
    return end + (start - end) * 0.5 * (1.0 + tf.cos(math.pi * tf.cast(progress, tf.float32)))


def linear_ramp(cycle, ramp_cycles: int) -> tf.Tensor:
    """Loss-weight ramp: 0 at cycle 0 rising linearly to 1 at `ramp_cycles` (1 when 0)."""
    if ramp_cycles <= 0:
        return tf.constant(1.0)
    return tf.minimum(1.0, tf.cast(cycle, tf.float32) / float(ramp_cycles))


def ramped_weight(cycle, start, end, ramp_cycles: int) -> tf.Tensor:
    """A loss weight moving linearly from `start` at cycle 0 to `end` at `ramp_cycles`, then
    `end` (`end` throughout when `ramp_cycles` is 0). `end` may be a variable: assigning it
    moves the rest of the ramp, and after the ramp it is the weight itself."""
    return start + (end - start) * linear_ramp(cycle, ramp_cycles)


def top_k_fraction(cycle, final: float, decay_cycles: int) -> tf.Tensor:
    """The fraction of fakes top-k generator training keeps at `cycle`: 1 at cycle 0, falling
    linearly to `final` at `decay_cycles` (`final` throughout when 0).

    Sinha et al. (2020) shrink k by a factor per epoch; a cycle count says the same for data
    without epochs (the toys) and matches --lr_warmup_cycles and --penalty_ramp_cycles.
    """
    return 1.0 - (1.0 - final) * linear_ramp(cycle, decay_cycles)


class PhaseLearningRate(keras.optimizers.schedules.LearningRateSchedule):
    """base * scale * learning_rate_factor(step): one per phase optimizer.

    `scale` is a variable so that a NaN rollback can lower the rate of a running optimizer
    (whatever its schedule) without rebuilding or retracing anything; it is checkpointed.
    `time_progress` (a run under `--train_time`) is the variable holding the share of the time
    budget used, which the controller assigns before every compiled loop; it is not
    checkpointed, since a resume recomputes it from the recorded seconds.
    """

    def __init__(self, *, base: float, kind: str, total: int | None, warmup: int = 0,
                 hold: int = 0, time_progress: tf.Variable | None = None):
        learning_rate_factor(kind, 0, total=total, warmup=warmup, hold=hold,
                             time_progress=time_progress)
        self.base = base
        self.kind = kind
        self.total = total
        self.warmup = warmup
        self.hold = hold
        self.time_progress = time_progress
        self.scale = tf.Variable(1.0, trainable=False, name="learning_rate_scale")

    def __call__(self, step):
        factor = learning_rate_factor(self.kind, step, total=self.total, warmup=self.warmup,
                                      hold=self.hold, time_progress=self.time_progress)
        return self.base * self.scale * factor

    def get_config(self):
        return {"base": self.base, "kind": self.kind, "total": self.total, "warmup": self.warmup,
                "hold": self.hold}


class ScheduledBeta2:
    """Mixin before a Keras Adam class: beta_2 moves along a half cosine from the `beta_2` it
    was made with to `beta_2_final` over the run, which is `total` updates or, under a time
    budget, `time_progress` (as `PhaseLearningRate`'s run: R3GAN raises it from 0.9 to 0.99).

    Keras's Adam reads `self.beta_2` only in `update_step`, and only while tracing: the
    scheduled tensor stands in for the constant there, computed from the optimizer's own
    `iterations`, which the checkpoint holds, so a resumed run continues the schedule exactly.
    The bias correction then uses the current beta_2, as PyTorch's Adam does when R3GAN sets it.
    """

    def __init__(self, *args, beta_2_final: float, total: int | None,
                 time_progress: tf.Variable | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        run_progress(0, total=total, time_progress=time_progress)
        self.beta_2_final = beta_2_final
        self._total = total
        self._time_progress = time_progress

    def beta_2_at(self, step) -> tf.Tensor:
        """beta_2 at 0-based update `step`."""
        progress = run_progress(step, total=self._total, time_progress=self._time_progress)
        return cosine_between(progress, self.beta_2, self.beta_2_final)

    def update_step(self, gradient, variable, learning_rate):
        constant = self.beta_2
        self.beta_2 = self.beta_2_at(self.iterations)
        try:
            super().update_step(gradient, variable, learning_rate)
        finally:
            self.beta_2 = constant
