"""Checks of a resolved `Config`: each bad value becomes a `ConfigError` that names the flag,
the value and the fix, before TensorFlow builds anything (path flags against the filesystem:
`paths.check_paths`)."""

from __future__ import annotations

import math
import re
from typing import Any, Callable, Sequence

from gan import architecture_names
from trainers.config.choices import (CHECKPOINT_CHOICES, INTERPOLATING_PENALTIES, NAMED_EVALUATORS,
                                     QUANTIZATIONS_BY_FORMAT, learning_rate_schedule_flags)
from trainers.config.flags import Config, ConfigError, declared
from trainers.config.paths import check_paths


def _require(condition: bool, flag: str, value: Any, fix: str) -> None:
    if not condition:
        raise ConfigError(f"--{flag}={value!r} is invalid: {fix}")


def _require_read(c: Config, flag: str, holds: Callable[[Any], bool], fix: str) -> None:
    """`_require` of a preset flag's value, unless it is None: a preset flag the run's setup
    does not read (`flags.check_preset`)."""
    value = getattr(c, flag)
    if value is not None:
        _require(holds(value), flag, value, fix)


# Every float flag ends up in a float32 variable or computation.
FLOAT32_MAX = 3.4028234663852886e38
# keras.utils.set_random_seed takes a 32-bit unsigned seed.
SEED_LIMIT = 2**32


def validate(config: Config) -> Config:
    """Checks a resolved config; returns it unchanged or raises `ConfigError`.

    The groups run in a fixed order, so a config with several bad flags reports the same one
    first every time."""
    c = config
    _validate_choices(c)
    _validate_finite(c)
    _validate_run(c)
    _validate_networks(c)
    _validate_inputs_outputs(c)
    _validate_updates(c)
    _validate_evaluation(c)
    _validate_regularizers(c)
    _validate_rates(c)
    if c.update_order == "simultaneous":
        _validate_simultaneous(c)
    _validate_pack_topk_weights(c)
    if c.dp_l2_clip or c.dp_noise_multiplier or c.dp_microbatches or c.dp_delta:
        _validate_privacy(c)
    _validate_sample_export_plot(c)
    check_paths(c)
    return config


def _validate_run(c: Config) -> None:
    """The run: seed, replicas, batch, length, periods and checkpoints."""
    _require(0 <= c.seed < SEED_LIMIT, "seed", c.seed, f"use an integer in [0, {SEED_LIMIT}).")
    _require(c.cpu_replicas >= 1, "cpu_replicas", c.cpu_replicas, "use 1 or more.")
    _require(not (c.strategy == "multi_worker" and c.cpu_replicas > 1), "cpu_replicas", c.cpu_replicas,
             "--strategy=multi_worker runs one CPU replica per worker process; use 1.")
    _require(c.batch_size >= 1, "batch_size", c.batch_size, "use a positive batch size.")
    _require(c.batch_size % c.cpu_replicas == 0, "batch_size", c.batch_size,
             f"it must be divisible by the {c.cpu_replicas} replicas of --cpu_replicas; "
             f"try {c.batch_size - c.batch_size % c.cpu_replicas or c.cpu_replicas}.")
    _require(c.train_cycles is None or c.train_cycles >= 1, "train_cycles", c.train_cycles,
             "use 1 or more cycles.")
    if c.train_time:
        _validate_train_time(c)
    _require(c.cycles_per_loop >= 1, "cycles_per_loop", c.cycles_per_loop, "use 1 or more.")
    for flag in ("image_every", "histogram_every", "checkpoint_every"):
        _require(getattr(c, flag) >= 0, flag, getattr(c, flag), "use 0 (never) or a positive period.")
    _require(c.checkpoint in CHECKPOINT_CHOICES or re.fullmatch("[0-9]+", c.checkpoint) is not None,
             "checkpoint", c.checkpoint,
             f"use {' or '.join(CHECKPOINT_CHOICES)}, or the step number of a kept checkpoint, e.g. 1200.")
    _require(c.keep_checkpoints >= 1, "keep_checkpoints", c.keep_checkpoints, "keep at least 1.")


def _validate_networks(c: Config) -> None:
    """The networks: latent size, widths, extra blocks, dropout, R3GAN's blocks."""
    _require(c.latent_dim >= 1, "latent_dim", c.latent_dim, "use a positive size.")
    _require(c.g_width >= 1, "g_width", c.g_width, "use a positive width.")
    _require(c.d_width >= 1, "d_width", c.d_width, "use a positive width.")
    for flag in ("g_extra_blocks", "d_extra_blocks"):
        _require(getattr(c, flag) >= 0, flag, getattr(c, flag),
                 "use 0 (the DCGAN network) or a count of stride-1 blocks per resolution, e.g. 1.")
    _require(0 <= c.d_dropout < 1, "d_dropout", c.d_dropout,
             "use 0 (no dropout) or a rate in (0, 1), e.g. 0.3.")
    _validate_r3gan(c)


def _validate_r3gan(c: Config) -> None:
    """--arch=r3gan's block shape: positive counts, and groups that split every block's expanded
    channels (expansion x width at full resolution, 2^k times that below)."""
    for flag in ("r3gan_blocks", "r3gan_expansion", "r3gan_group_width"):
        _require(getattr(c, flag) >= 1, flag, getattr(c, flag), "use a positive number.")
    if c.arch != architecture_names.R3GAN:
        return
    for width_flag in ("g_width", "d_width"):
        expanded = c.r3gan_expansion * getattr(c, width_flag)
        _require(expanded % c.r3gan_group_width == 0, "r3gan_group_width", c.r3gan_group_width,
                 f"it must divide the {expanded} channels of --r3gan_expansion={c.r3gan_expansion}"
                 f" x --{width_flag}={getattr(c, width_flag)}; use a divisor such as "
                 f"{math.gcd(expanded, c.r3gan_group_width)}.")


def _validate_inputs_outputs(c: Config) -> None:
    """The input pipeline, the samples and where they are written."""
    _require(c.shuffle_buffer >= 1, "shuffle_buffer", c.shuffle_buffer, "use 1 or more.")
    _require(c.num_samples >= 1, "num_samples", c.num_samples, "ask for at least one sample.")
    _require(c.output.endswith((".png", ".npy")), "output", c.output,
             "the file must end in .png (a grid) or .npy (uint8 NHWC images).")
    _require(bool(c.logdir), "logdir", c.logdir, "give a directory for checkpoints and summaries.")


def _validate_updates(c: Config) -> None:
    """The optimizers, the k:1 schedule and the discriminator's penalty and clipping."""
    for flag in ("g_lr", "d_lr", "student_lr"):
        _require_read(c, flag, lambda rate: rate > 0, "learning rates must be positive.")
    for flag in ("beta1", "beta2"):
        _require(0 <= getattr(c, flag) < 1, flag, getattr(c, flag), "use a value in [0, 1).")
    _require(0 <= c.beta2_final < 1, "beta2_final", c.beta2_final,
             "use 0 (--beta2 throughout) or a final Adam beta_2 in (0, 1), e.g. 0.99.")
    _require(not c.beta2_final or c.optimizer == "adam", "beta2_final", c.beta2_final,
             f"only Adam has a beta_2, and --optimizer={c.optimizer}; use 0 or --optimizer=adam.")
    _require_read(c, "d_updates", lambda updates: updates >= 1,
                  "the discriminator needs at least 1 update per cycle (k in k:1 alternation).")
    _require_read(c, "g_updates", lambda updates: updates >= 1,
                  "the generator needs at least 1 update per cycle.")
    _require_read(c, "student_updates", lambda updates: updates >= 1,
                  "the student needs at least 1 update per cycle.")
    _require_read(c, "penalty_weight", lambda weight: weight >= 0, "use 0 or a positive weight.")
    _require_read(c, "clip_value", lambda bound: bound >= 0,
                  "use 0 (no clipping) or a positive bound.")
    _require(not (c.penalty in INTERPOLATING_PENALTIES and c.d_normalization == "batch"),
             "d_normalization", c.d_normalization,
             "batch norm mixes examples, which breaks the per-example gradient penalty; "
             "use none or layer.")


def _validate_evaluation(c: Config) -> None:
    """Periodic evaluation and its evaluator."""
    _require(c.eval_every >= 0, "eval_every", c.eval_every, "use 0 (never) or a positive period.")
    _require(c.eval_samples >= 2, "eval_samples", c.eval_samples, "use at least 2 (e.g. 2000 or 10000).")
    _require(c.mode_samples >= 1, "mode_samples", c.mode_samples,
             "use a positive count (26000, 26 per mode, as StackedMNIST is reported with).")
    _require(c.evaluator_epochs >= 1, "evaluator_epochs", c.evaluator_epochs, "use 1 or more.")
    _require(c.evaluator_train_examples >= 0, "evaluator_train_examples", c.evaluator_train_examples,
             "use 0 (the whole training split) or a positive count.")
    _require(c.evaluator in NAMED_EVALUATORS or c.evaluator.endswith((".keras", ".h5")),
             "evaluator", c.evaluator,
             "use domain (Gantry's classifier), inception (the standard FID network), "
             "keras_inception_v3, or the path of a .keras/.h5 model.")
    _require(not c.inception_graph or c.evaluator == "inception", "inception_graph",
             c.inception_graph, f"it is read by --evaluator=inception only (not "
             f"--evaluator={c.evaluator}); drop it or use --evaluator=inception.")
    _require(c.keras_inception_weights == "imagenet" or c.evaluator == "keras_inception_v3",
             "keras_inception_weights", c.keras_inception_weights,
             "it is read by --evaluator=keras_inception_v3 only (Keras's InceptionV3, whose "
             "FIDs are not comparable with published ones); the standard FID network is "
             "--evaluator=inception with --inception_graph.")


def _validate_regularizers(c: Config) -> None:
    """Lazy penalty, spectral normalization, consistency and the EMA generator."""
    _require_read(c, "penalty_every", lambda every: every >= 1,
                  "use 1 (penalty in every discriminator update) or N > 1 (lazy, every N cycles).")
    _require(not (c.d_spectral_norm and c.d_normalization != "none"), "d_normalization",
             c.d_normalization, "spectral normalization replaces it in the discriminator; use none.")
    _require(c.consistency_weight >= 0, "consistency_weight", c.consistency_weight,
             "use 0 (off) or a positive weight, e.g. 10.")
    _require_read(c, "ema_halflife_kimg", lambda halflife: halflife >= 0,
                  "use 0 (no EMA generator) or a positive half-life in thousands of images, e.g. 10.")
    _require(c.ema_halflife_schedule in (None, "constant") or c.ema_halflife_kimg > 0,
             "ema_halflife_schedule", c.ema_halflife_schedule,
             "a rising half-life needs an EMA generator; give --ema_halflife_kimg > 0 (its final "
             "half-life) or use constant.")
    _require_read(c, "penalty_final_factor", lambda factor: factor >= 0,
                  "use 1 (a constant weight) or the weight's final multiple, e.g. 0.1.")
    _require(c.ema_rampup >= 0, "ema_rampup", c.ema_rampup, "use 0 (no ramp-up) or e.g. 0.05.")


def _validate_rates(c: Config) -> None:
    """Gradient clipping, learning-rate schedules, ramps, rollbacks and XLA."""
    for flag in ("g_clip_global_norm", "d_clip_global_norm", "student_clip_global_norm"):
        _require(getattr(c, flag) >= 0, flag, getattr(c, flag), "use 0 (no clipping) or a positive norm.")
    _require(c.lr_warmup_cycles >= 0, "lr_warmup_cycles", c.lr_warmup_cycles, "use 0 or more cycles.")
    _validate_lr_hold(c)
    parse_lr_multipliers(c.lr_multipliers)
    _require(c.penalty_ramp_cycles >= 0, "penalty_ramp_cycles", c.penalty_ramp_cycles, "use 0 or more cycles.")
    _require(0 < c.nan_lr_factor <= 1, "nan_lr_factor", c.nan_lr_factor,
             "use a factor in (0, 1]: 1 keeps the learning rates after a rollback.")
    _require(c.max_rollbacks >= 0, "max_rollbacks", c.max_rollbacks, "use 0 or more.")
    _require(isinstance(c.jit_compile, bool), "jit_compile", c.jit_compile, "use true or false.")


def _validate_pack_topk_weights(c: Config) -> None:
    """PacGAN packing, top-k training and the loss weights."""
    _require(c.pack >= 1, "pack", c.pack, "use 1 (off) or the samples per pack, e.g. 2.")
    _require(c.batch_size % (c.pack * c.cpu_replicas) == 0, "pack", c.pack,
             f"each replica's share of --batch_size={c.batch_size} must split into packs; use a "
             f"batch size that is a multiple of {c.pack * c.cpu_replicas}.")
    _require_read(c, "topk", lambda kept: 0 < kept <= 1,
                  "use 1 (off) or the fraction of fakes the generator learns from, e.g. 0.5.")
    _require_read(c, "topk_decay_cycles", lambda cycles: cycles >= 0, "use 0 or more cycles.")
    for flag in ("aux_weight", "cycle_weight", "identity_weight"):
        _require(getattr(c, flag) >= 0, flag, getattr(c, flag), "use 0 (off) or a positive weight.")


DURATION = re.compile(r"(\d+(?:\.\d*)?)([smh])")
SECONDS_PER_UNIT = {"s": 1, "m": 60, "h": 3600}


def _validate_lr_hold(c: Config) -> None:
    """inverse_sqrt needs --lr_hold_cycles: its rate at cycle t is sqrt(N / t), which has no
    scale without N. (An explicit hold that no schedule reads: `registry.resolve`.)"""
    _require(c.lr_hold_cycles >= 0, "lr_hold_cycles", c.lr_hold_cycles, "use 0 or more cycles.")
    inverse_sqrt = [flag for flag in learning_rate_schedule_flags()
                    if getattr(c, flag) == "inverse_sqrt"]
    if inverse_sqrt:
        _require(c.lr_hold_cycles >= 1, "lr_hold_cycles", c.lr_hold_cycles,
                 f"--{inverse_sqrt[0]}=inverse_sqrt keeps the full rate for --lr_hold_cycles "
                 "cycles, then decays from there; use 1 or more, e.g. 10000.")


def train_time_seconds(text: str) -> float | None:
    """`--train_time` in seconds (None when empty: no time limit)."""
    if not text:
        return None
    match = DURATION.fullmatch(text)
    seconds = float(match.group(1)) * SECONDS_PER_UNIT[match.group(2)] if match else 0.0
    _require(seconds > 0, "train_time", text,
             "use a positive number followed by s, m or h, e.g. 90s, 10m or 2h.")
    return seconds


def _validate_train_time(c: Config) -> None:
    """A time budget ends the run at a step not known in advance: refuses what needs that step
    to be the same on every worker. (A decaying rate follows the share of the time used.)"""
    train_time_seconds(c.train_time)
    _require(c.strategy != "multi_worker", "strategy", c.strategy,
             f"--train_time={c.train_time} is measured by each worker's own clock, so workers "
             "could stop at different steps; use --train_cycles with multi_worker.")


def _validate_finite(c: Config) -> None:
    """Every float flag is a finite float32 value: inf, nan or 1e308 would only surface as a
    non-finite step after the run started."""
    for name in declared():
        value = getattr(c, name)
        if isinstance(value, float):
            _require(math.isfinite(value) and abs(value) <= FLOAT32_MAX, name, value,
                     "use a finite number (at most 3.4e38 in size: values are float32).")


def _validate_choices(c: Config) -> None:
    """Every flag with choices (`Flag.choices`) holds one of them (or None: a preset flag the
    run's setup does not read)."""
    for flag in declared().values():
        if flag.choices and getattr(c, flag.name) is not None:
            value = getattr(c, flag.name)
            _require(value in flag.choices, flag.name, value, f"use one of {', '.join(flag.choices)}.")


def _validate_simultaneous(c: Config) -> None:
    """--update_order=simultaneous: one D and one G update per cycle, from one forward pass."""
    for flag in ("d_updates", "g_updates"):
        _require(getattr(c, flag) == 1, flag, getattr(c, flag),
                 "--update_order=simultaneous updates D and G once per cycle from one shared "
                 "forward pass; use --d_updates=1 --g_updates=1, or --update_order=alternating for "
                 "k:1 training.")
    _require(c.clip_value == 0, "clip_value", c.clip_value,
             "WGAN weight clipping happens between the D and the G update, which "
             "--update_order=simultaneous does not have; use --clip_value=0 (e.g. with "
             "--penalty=gradient_penalty) or --update_order=alternating.")
    _require(c.d_clip_global_norm == c.g_clip_global_norm, "d_clip_global_norm",
             c.d_clip_global_norm,
             f"--update_order=simultaneous clips D's and G's gradients (each on its own) to one "
             f"norm, and --g_clip_global_norm={c.g_clip_global_norm!r} differs; give both the "
             "same value (0 = off).")


# What reads real data in a discriminator update besides its per-example loss: refused with
# --dp_l2_clip, since no per-example clipping covers it (R2 and WGAN clipping read fakes only).
_PRIVATE_PENALTIES_REFUSED = (*INTERPOLATING_PENALTIES, "dragan", "r1", "r1_r2")


def _validate_privacy(c: Config) -> None:
    """Differential privacy: both knobs set, and nothing in the discriminator update that mixes
    real examples or reads them outside the clipped per-example gradients."""
    _require(c.dp_l2_clip > 0, "dp_l2_clip", c.dp_l2_clip,
             "differential privacy needs a clipping norm > 0, e.g. --dp_l2_clip=1 (with "
             "--dp_noise_multiplier); leave every --dp_* flag unset for none.")
    _require(c.dp_noise_multiplier > 0, "dp_noise_multiplier", c.dp_noise_multiplier,
             "differential privacy needs noise > 0, e.g. --dp_noise_multiplier=1 (with "
             "--dp_l2_clip); leave every --dp_* flag unset for none.")
    microbatches = c.dp_microbatches or c.batch_size
    _require(c.dp_microbatches >= 0 and c.batch_size % microbatches == 0
             and microbatches % c.cpu_replicas == 0, "dp_microbatches", c.dp_microbatches,
             f"use 0 (one per example) or a divisor of --batch_size={c.batch_size} that "
             f"splits over the {c.cpu_replicas} replicas of --cpu_replicas.")
    _require((c.batch_size // microbatches) % c.pack == 0, "pack", c.pack,
             f"a pack mixes {c.pack} examples, so it must lie inside one microbatch of "
             f"{c.batch_size // microbatches}; use --pack=1 or fewer --dp_microbatches.")
    _require(0 <= c.dp_delta < 1, "dp_delta", c.dp_delta,
             "use 0 (1 / the number of training examples) or a delta in (0, 1), e.g. 1e-5.")
    _require(c.penalty not in _PRIVATE_PENALTIES_REFUSED, "penalty", c.penalty,
             "this penalty differentiates the discriminator at real images outside the "
             "per-example clipping, which breaks differential privacy (--dp_l2_clip); use "
             "--penalty=none or r2 (it reads fakes only).")
    _require(c.loss != "relativistic", "loss", c.loss,
             "the relativistic loss pairs each fake with a real image in the generator's update, "
             "which no per-example clipping covers (--dp_l2_clip); use non_saturating or another "
             "loss whose generator reads fakes only.")
    _require(c.consistency_weight == 0, "consistency_weight", c.consistency_weight,
             "consistency regularization reads real images outside the per-example clipping, "
             "which breaks differential privacy (--dp_l2_clip); use 0.")
    _require(c.d_normalization != "batch", "d_normalization", c.d_normalization,
             "batch norm in the discriminator mixes the examples of a batch, which breaks "
             "per-example differential privacy (--dp_l2_clip); use --d_normalization=none or layer.")
    _require(c.update_order == "alternating", "update_order", c.update_order,
             "differential privacy (--dp_l2_clip) clips the discriminator's own update; use "
             "--update_order=alternating.")
    _require(c.precision != "mixed_float16", "precision", c.precision,
             "differential privacy (--dp_l2_clip) clips unscaled gradients; use float32 or "
             "mixed_bfloat16.")
    _require(not c.jit_compile, "jit_compile", c.jit_compile,
             "differential privacy's loop over microbatches (--dp_l2_clip) is not compiled "
             "with XLA; use --jit_compile=false.")


def parse_grid(text: str) -> tuple[int, int] | None:
    """`--grid` "RxC" -> (R, C); "" -> None. ConfigError for anything else."""
    if not text:
        return None
    match = re.fullmatch(r"(\d+)x(\d+)", text)
    _require(match is not None and min(int(match[1]), int(match[2])) >= 1, "grid", text,
             "use ROWSxCOLUMNS with positive integers, e.g. 8x8, or leave it empty.")
    return int(match[1]), int(match[2])


def parse_lr_multipliers(text: str) -> tuple[tuple[str, float], ...]:
    """`--lr_multipliers` "REGEX=FACTOR,..." -> ((regex, factor), ...) in the given order
    (the first pattern found in a variable's name decides). ConfigError for bad syntax, a regex
    that does not compile, or a factor that is not a finite number >= 0."""
    rules = []
    for item in text.split(",") if text else ():
        pattern, equals, factor = item.rpartition("=")
        _require(bool(equals and pattern), "lr_multipliers", text,
                 f"{item!r} is not REGEX=FACTOR; use e.g. generator/seed=0,discriminator/down0=0.1 "
                 "(patterns cannot contain commas).")
        try:
            re.compile(pattern)
        except re.error as error:
            raise ConfigError(f"--lr_multipliers={text!r} is invalid: {pattern!r} is not a "
                              f"regular expression ({error}).") from None
        try:
            value = float(factor)
        except ValueError:
            value = math.nan
        _require(math.isfinite(value) and 0 <= value <= FLOAT32_MAX, "lr_multipliers", text,
                 f"the factor of {pattern!r} is {factor!r}; use a finite number >= 0 "
                 "(0 freezes, 1 keeps the rate).")
        rules.append((pattern, value))
    patterns = [pattern for pattern, _ in rules]
    repeated = sorted({p for p in patterns if patterns.count(p) > 1})
    _require(not repeated, "lr_multipliers", text,
             f"patterns {repeated} appear twice; give each once (the first match decides).")
    return tuple(rules)


def frozen_structure(text: str) -> tuple[tuple[str, bool], ...]:
    """What of `--lr_multipliers` a resume must keep: the patterns in order and which freeze
    (factor 0). Together they decide which variables have optimizer slots in the checkpoint;
    the other factors only scale rates and may change like the learning rates."""
    return tuple((pattern, factor == 0) for pattern, factor in parse_lr_multipliers(text))


def class_index(value: str, *, flag: str, num_classes: int,
                class_names: Sequence[str] | None = None) -> int:
    """A class given as an index ("7") or by name, in any case ("sneaker") -> its index.

    One parser for every flag that names a class, so they all accept the same spellings and
    list the same valid choices when a value is wrong (ConfigError). `class_names` is
    `DatasetInfo.class_names` (None: indices only).
    """
    if num_classes < 1:
        raise ValueError(f"class_index needs num_classes >= 1, got {num_classes!r}.")
    text = value.strip()
    if re.fullmatch(r"\d+", text) and int(text) < num_classes:
        return int(text)
    folded = [name.casefold() for name in class_names or ()]
    if text.casefold() in folded:
        return folded.index(text.casefold())
    names = f" or a name (any case): {', '.join(map(repr, class_names))}" if class_names else ""
    raise ConfigError(f"--{flag}={value!r} is invalid: use a class index 0..{num_classes - 1}{names}.")


def _validate_sample_export_plot(c: Config) -> None:
    grid = parse_grid(c.grid)
    if grid is not None:
        cells = grid[0] * grid[1]
        _require(c.num_samples in (Config.num_samples, cells), "num_samples", c.num_samples,
                 f"--grid={c.grid} draws {cells} samples; drop --num_samples or set it to {cells}.")
    _require(c.interpolate == 0 or c.interpolate >= 2, "interpolate", c.interpolate,
             "use 0 (off) or the images per row, at least 2 (both ends included).")
    _require(not (c.interpolate and grid), "grid", c.grid,
             f"--interpolate={c.interpolate} lays out one row per noise pair (--num_samples rows "
             f"of {c.interpolate}); drop --grid.")
    _require(c.truncation >= 0, "truncation", c.truncation,
             "use 0 (off) or a threshold psi > 0, e.g. 0.7: noise values with |z| > psi are redrawn.")
    _require(not c.label or c.mode == "sample", "label", c.label,
             "it picks the class --mode=sample draws; training, eval and export cover every "
             "class: drop it.")
    _require(c.export_dir is None or bool(c.export_dir), "export_dir", c.export_dir,
             "give a directory, or leave it unset for LOGDIR/export.")
    _require(re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]*", c.export_name) is not None, "export_name",
             c.export_name, "use letters, digits, '_', '-' and '.', not starting with '.': it "
             "becomes one directory name.")
    _require(c.export_version is None or c.export_version >= 0, "export_version", c.export_version,
             "use a non-negative integer (TF Serving loads numeric version directories), or leave "
             "it unset for the checkpoint's step.")
    quantizations = QUANTIZATIONS_BY_FORMAT[c.export_format]
    _require(c.quantize in quantizations, "quantize", c.quantize,
             f"--export_format={c.export_format} takes --quantize={', '.join(quantizations)}"
             if len(quantizations) > 1 else "quantization applies to --export_format=tflite "
             "(float16, dynamic_int8) and tfjs (float16, uint8); add one or use --quantize=none.")
    _require(c.mode != "plot" or c.output.endswith(".png"), "output", c.output,
             "--mode=plot draws a PNG; give a path ending in .png (default: LOGDIR/curves.png).")
