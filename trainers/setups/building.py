"""What every setup does the same way when it builds: precision policy, optimizers, EMA.

`build_run` is the one way to build a run: it calls the setup's `build` inside the strategy
scope and the dtype policy, then `build_optimizers`, the one place that creates a run's
optimizers, with their learning-rate schedules spanning the run, built on their variables
before the first compiled step (Keras 3 creates optimizer slots lazily, which a compiled step
under a strategy cannot do).
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import TYPE_CHECKING, Callable, Iterator, Mapping, Sequence

import keras
import tensorflow as tf

from trainers.config.flags import Config, ConfigError
from trainers.config.validation import parse_lr_multipliers
from trainers.engine import ema, hardware, rates, schedules
from trainers.engine.phases import Phase, optimizer_models, optimizer_updates_after
from trainers.setups import user_networks
from trainers.setups.protocol import Built, LearningRate

if TYPE_CHECKING:
    from datasets.registry import DatasetInfo
    from trainers.setups.protocol import Setup


def auto_precision(config: Config) -> tuple[str, str]:
    """What `--precision=auto` trains a new run with, and the line that says why: float32 with a
    user network (it keeps the dtype policy it was built with, which export could not turn back
    into float32), else the hardware's choice (`hardware.resolve_precision`)."""
    if user_networks.uses_user_network(config):
        return "float32", "--precision=auto: float32 (a user network keeps its own dtype policy)."
    return hardware.resolve_precision("auto", native=hardware.detect())


@contextlib.contextmanager
def dtype_policy(config: Config) -> Iterator[None]:
    """Builds models under the `--precision` policy without leaving it set globally. An `auto`
    here is a config the train mode did not resolve (the Keras path, a notebook's build):
    `auto_precision`'s choice."""
    name = auto_precision(config)[0] if config.precision == "auto" else config.precision
    previous = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy(name)
    try:
        yield
    finally:
        keras.mixed_precision.set_global_policy(previous)


# --optimizer -> (the Keras class, the same with per-variable rates for --lr_multipliers).
OPTIMIZER_CLASSES = {"adam": (keras.optimizers.Adam, rates.Adam),
                     "rmsprop": (keras.optimizers.RMSprop, rates.RMSprop)}


class ScheduledAdam(schedules.ScheduledBeta2, keras.optimizers.Adam):
    """Adam whose beta_2 moves over the run (--beta2_final)."""


class ScheduledFactoredAdam(schedules.ScheduledBeta2, rates.Adam):
    """Adam whose beta_2 moves over the run, with a learning-rate factor per variable."""


# --beta2_final (not 0): the Adam classes above for --optimizer=adam's two.
SCHEDULED_BETA2_CLASSES = (ScheduledAdam, ScheduledFactoredAdam)


def phase_optimizer(config: Config, *, base_rate: float, schedule: str, total_updates: int | None,
                    warmup_updates: int, hold_updates: int,
                    factor_of: Callable[[keras.Variable], float] | None = None,
                    time_progress: tf.Variable | None = None,
                    ) -> tuple[keras.optimizers.Optimizer, tf.Variable]:
    """The optimizer for one phase and its learning-rate scale variable.

    With `factor_of`, each variable's rate is multiplied by ``factor_of(variable)``
    (`rates.PerVariableRates`). Adam's beta_2 moves to --beta2_final over the run when that is
    not 0 (`schedules.ScheduledBeta2`). Under mixed_float16 it is wrapped in its own
    LossScaleOptimizer, so each model's loss scale adapts to its own gradients.
    `time_progress` is the run's share of --train_time used (`train_time_progress`).
    """
    total = None if total_updates is None else max(total_updates, 1)
    rate = schedules.PhaseLearningRate(
        base=base_rate, kind=schedule, warmup=warmup_updates, hold=hold_updates,
        time_progress=time_progress, total=total)
    plain, factored = OPTIMIZER_CLASSES[config.optimizer]
    options = {"beta_1": config.beta1, "beta_2": config.beta2} if config.optimizer == "adam" else {}
    if options and config.beta2_final:
        plain, factored = SCHEDULED_BETA2_CLASSES
        options.update(beta_2_final=config.beta2_final, total=total, time_progress=time_progress)
    optimizer = plain(rate, **options) if factor_of is None else factored(rate, factor_of=factor_of, **options)
    if config.precision == "mixed_float16":
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    return optimizer, rate.scale


def adversarial_rates(config: Config, generators: Sequence[str], discriminators: Sequence[str]
                      ) -> dict[str, LearningRate]:
    """`Setup.learning_rates` of a setup with generator and discriminator optimizers: the
    generators' --g_lr and --g_lr_schedule, the discriminators' --d_lr and --d_lr_schedule."""
    return {**{name: LearningRate(config.g_lr, config.g_lr_schedule) for name in generators},
            **{name: LearningRate(config.d_lr, config.d_lr_schedule) for name in discriminators}}


def build_run(setup: Setup, config: Config, info: DatasetInfo,
              strategy: tf.distribute.Strategy) -> Built:
    """The run `setup` builds for `config` on `info`: its `Parts`, built with every variable in
    `strategy`'s scope and the models under the `--precision` policy (`dtype_policy`), and the
    optimizers of every optimizer its phases name, with their rate scales and the train-time
    progress (`build_optimizers`, from `setup.learning_rates`). Every caller of `Setup.build`
    (train, restore, the Keras path) goes through here, so no setup wires optimizers itself."""
    with strategy.scope(), dtype_policy(config):
        parts = setup.build(config, info)
        if parts.train_time_progress is None:
            parts = dataclasses.replace(parts, train_time_progress=train_time_progress(config))
        optimizers, scales = build_optimizers(config, parts.phases, parts.models,
                                              setup.learning_rates(config),
                                              parts.train_time_progress)
    return Built(**{field.name: getattr(parts, field.name) for field in dataclasses.fields(parts)},
                 optimizers=optimizers, learning_rate_scales=scales)


def train_time_progress(config: Config) -> tf.Variable | None:
    """The variable holding a timed run's share of --train_time used (0 to 1), which the
    controller assigns before every compiled loop and decaying rate schedules read; None
    without --train_time. Create it inside `strategy.scope()`, as the schedules' own."""
    if not config.train_time:
        return None
    return tf.Variable(0.0, trainable=False, name="train_time_progress")


def build_optimizers(config: Config, phases: Sequence[Phase], models: Mapping[str, keras.Model],
                     learning_rates: Mapping[str, LearningRate],
                     time_progress: tf.Variable | None = None,
                     ) -> tuple[dict[str, keras.optimizers.Optimizer], dict[str, tf.Variable]]:
    """(optimizers, learning-rate scales), keyed by optimizer name, for `phases`;
    `time_progress` is the run's `train_time_progress` (`build_run`), None without --train_time.

    Call inside `strategy.scope()`. `learning_rates` (`Setup.learning_rates`) gives each
    optimizer's base rate and schedule; ValueError for an optimizer it leaves out. Each
    optimizer's schedule spans the updates it applies in
    --train_cycles cycles, or the --train_time budget (whichever ends first), with
    --lr_warmup_cycles cycles of warm-up (and an inverse_sqrt schedule holds for
    --lr_hold_cycles cycles); each is built on the trainable variables of every
    model it updates, after --lr_multipliers froze its factor-0 variables
    (`apply_lr_multipliers`).
    """
    totals = ({} if config.train_cycles is None
              else optimizer_updates_after(phases, config.train_cycles))
    warmups = optimizer_updates_after(phases, config.lr_warmup_cycles)
    holds = optimizer_updates_after(phases, config.lr_hold_cycles)
    factors = apply_lr_multipliers(config, phases, models)
    factor_of = factors.lookup(models) if factors.rules else None
    owners = optimizer_models(phases)
    missing = sorted(set(owners) - set(learning_rates))
    if missing:
        raise ValueError(f"Optimizers {missing} have no learning rate: Setup.learning_rates "
                         f"gives only {sorted(learning_rates)}.")
    optimizers, scales = {}, {}
    for name, owned in owners.items():
        optimizers[name], scales[name] = phase_optimizer(
            config, base_rate=learning_rates[name].base, schedule=learning_rates[name].schedule,
            total_updates=totals.get(name), warmup_updates=warmups[name],
            hold_updates=holds[name], factor_of=factor_of,
            time_progress=time_progress)
        optimizers[name].build([v for model in owned for v in models[model].trainable_variables])
    return optimizers, scales


def apply_lr_multipliers(config: Config, phases: Sequence[Phase], models: Mapping[str, keras.Model]
                         ) -> rates.RateFactors:
    """--lr_multipliers' factors over the variables of the models the phases train, after
    freezing those with factor 0 (`rates.freeze`).

    ConfigError for a pattern found in no such variable's name (it would silently change
    nothing: a typo, or a layer named otherwise), or one that freezes a trained model whole
    (its phase would then have nothing to update).
    """
    factors = rates.RateFactors(parse_lr_multipliers(config.lr_multipliers))
    if not factors.rules:
        return factors
    trained = {name: models[name] for owned in optimizer_models(phases).values() for name in owned}
    unmatched = factors.unmatched([rates.variable_name(name, v) for name, model in trained.items()
                                   for v in model.trainable_variables])
    if unmatched:
        examples = [rates.variable_name(name, v) for name, model in trained.items()
                    for v in model.trainable_variables[:3]]
        raise ConfigError(
            f"--lr_multipliers={config.lr_multipliers!r} is invalid: {unmatched} match no "
            f"variable of the trained models {list(trained)}; their names look like {examples}.")
    rates.freeze(factors, trained)
    emptied = [name for name, model in trained.items() if not model.trainable_variables]
    if emptied:
        raise ConfigError(
            f"--lr_multipliers={config.lr_multipliers!r} is invalid: it freezes every variable "
            f"of {emptied}, which a phase trains; give some of their variables a factor > 0.")
    return factors


def ema_halflife_kimg(config: Config, cycle, time_progress: tf.Variable | None = None):
    """The EMA half-life at 0-based `cycle`: --ema_halflife_kimg, or with
    --ema_halflife_schedule=cosine rising from 0 along a half cosine to it at the run's end
    (--train_cycles, or `time_progress` of --train_time: R3GAN's rising half-life)."""
    if config.ema_halflife_schedule == "constant":
        return config.ema_halflife_kimg
    progress = schedules.run_progress(cycle, total=config.train_cycles, time_progress=time_progress)
    return schedules.cosine_between(progress, 0.0, config.ema_halflife_kimg)


def ema_updater(config: Config, time_progress: tf.Variable | None = None
                ) -> Callable[[Mapping[str, keras.Model], tf.Tensor], None]:
    """``after_update`` for the generator phase: moves generator_ema towards generator, with
    the half-life of `ema_halflife_kimg` (`time_progress`: the run's `train_time_progress`)."""
    images_per_cycle = config.batch_size * config.g_updates

    def update(models, cycle):
        images_seen = (tf.cast(cycle, tf.float32) + 1.0) * images_per_cycle
        beta = ema.ema_beta(batch_size=config.batch_size,
                            halflife_kimg=ema_halflife_kimg(config, cycle, time_progress),
                            images_seen=images_seen, rampup=config.ema_rampup)
        ema.update_ema(models["generator_ema"], models["generator"], beta)

    return update
