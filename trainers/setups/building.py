"""What every setup does the same way when it builds: precision policy, optimizers, EMA.

`build_optimizers` is the one place that creates a run's optimizers: inside the strategy
scope, with their learning-rate schedules spanning the run, and built on their variables before
the first compiled step (Keras 3 creates optimizer slots lazily, which a compiled step under a
strategy cannot do).
"""

from __future__ import annotations

import contextlib
from typing import Callable, Iterator, Mapping, Sequence

import keras
import tensorflow as tf

from trainers.config.fields import Config
from trainers.engine import ema, schedules
from trainers.engine.phases import Phase, optimizer_models, optimizer_updates_after


@contextlib.contextmanager
def dtype_policy(name: str) -> Iterator[None]:
    """Builds models under the `--precision` policy without leaving it set globally."""
    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy(name)
    try:
        yield
    finally:
        keras.mixed_precision.set_global_policy(previous)


def phase_optimizer(config: Config, *, base_rate: float, schedule: str, total_updates: int,
                    warmup_updates: int) -> tuple[keras.optimizers.Optimizer, tf.Variable]:
    """The optimizer for one phase and its learning-rate scale variable.

    Under mixed_float16 it is wrapped in its own LossScaleOptimizer, so each model's loss scale
    adapts to its own gradients.
    """
    rate = schedules.PhaseLearningRate(base=base_rate, kind=schedule, total=max(total_updates, 1),
                                       warmup=warmup_updates)
    if config.optimizer == "adam":
        optimizer = keras.optimizers.Adam(rate, beta_1=config.beta1, beta_2=config.beta2)
    else:
        optimizer = keras.optimizers.RMSprop(rate)
    if config.precision == "mixed_float16":
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    return optimizer, rate.scale


def is_generator_optimizer(name: str) -> bool:
    """Generator optimizers (named "generator...") take --g_lr/--g_lr_schedule, all others
    --d_lr/--d_lr_schedule."""
    return name.startswith("generator")


def build_optimizers(config: Config, phases: Sequence[Phase], models: Mapping[str, keras.Model]
                     ) -> tuple[dict[str, keras.optimizers.Optimizer], dict[str, tf.Variable]]:
    """(optimizers, learning-rate scales), keyed by optimizer name, for `phases`.

    Call inside `strategy.scope()`. Each optimizer's schedule spans the updates it applies in
    --train_steps cycles, with --lr_warmup_steps cycles of warm-up; each is built on the
    trainable variables of every model it updates.
    """
    totals = optimizer_updates_after(phases, config.train_steps)
    warmups = optimizer_updates_after(phases, config.lr_warmup_steps)
    optimizers, scales = {}, {}
    for name, owned in optimizer_models(phases).items():
        generator = is_generator_optimizer(name)
        optimizers[name], scales[name] = phase_optimizer(
            config, base_rate=config.g_lr if generator else config.d_lr,
            schedule=config.g_lr_schedule if generator else config.d_lr_schedule,
            total_updates=totals[name], warmup_updates=warmups[name])
        optimizers[name].build([v for model in owned for v in models[model].trainable_variables])
    return optimizers, scales


def ema_updater(config: Config) -> Callable[[Mapping[str, keras.Model], tf.Tensor], None]:
    """``after_update`` for the generator phase: moves generator_ema towards generator."""
    images_per_cycle = config.batch_size * config.g_steps

    def update(models, cycle):
        images_seen = (tf.cast(cycle, tf.float32) + 1.0) * images_per_cycle
        beta = ema.ema_beta(batch_size=config.batch_size, halflife_kimg=config.ema_halflife_kimg,
                            images_seen=images_seen, rampup=config.ema_rampup)
        ema.update_ema(models["generator_ema"], models["generator"], beta)

    return update
