"""What `--mode=sample`, the exported `seed` signature and the progress images feed a generator:
noise as a pure function of `--seed`, truncation, slerp interpolation, and the class layouts of
conditional runs.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import tensorflow as tf

from trainers.config.flags import Config, ConfigError
from trainers.config.validation import class_index, parse_grid

FIXED_NOISE_SALT = 7919
SAMPLE_NOISE_SALT = 104729
TRUNCATION_SALT = 15485863
TRUNCATION_ROUNDS = 100


def sample_noise(seed, count, latent_shape: tuple[int, ...]) -> tf.Tensor:
    """The noise `--mode=sample --seed=SEED --num_samples=COUNT` draws, row i the same for any
    count; the exported `seed` signature calls this too, so both draw identical noise.

    `seed` and `count` may be Python ints or scalar tensors (int64 seed, int32 count).
    """
    shape = tf.concat([tf.reshape(tf.cast(count, tf.int32), [1]),
                       tf.constant(latent_shape, tf.int32)], axis=0)
    key = tf.stack([tf.cast(seed, tf.int64), tf.constant(SAMPLE_NOISE_SALT, tf.int64)])
    return tf.random.stateless_normal(shape, seed=key)


def fixed_noise(config: Config, latent_shape: tuple[int, ...], count: int) -> tf.Tensor:
    """The noise batch of every progress image of a run (derived from --seed), the same all run
    long so the images show the generator's progress."""
    return tf.random.stateless_normal([count, *latent_shape], seed=[config.seed, FIXED_NOISE_SALT])


def truncate_noise(noise: tf.Tensor, *, psi: float, seed: int) -> tf.Tensor:
    """The truncation trick for Gaussian noise: every value with |z| > psi is redrawn.

    Values inside [-psi, psi] are kept, so a truncated batch shares most coordinates with the
    untruncated one; the result follows the normal distribution truncated to [-psi, psi].
    Redraws are stateless (a function of `seed` and the round), up to TRUNCATION_ROUNDS rounds;
    the few values still outside after that (only for psi well below 0.5) are clipped.
    """
    if psi <= 0:
        raise ValueError(f"truncate_noise needs psi > 0, got {psi!r}; use e.g. 0.7.")
    for round_index in range(TRUNCATION_ROUNDS):
        outside = tf.abs(noise) > psi
        if not bool(tf.reduce_any(outside)):
            return noise
        redrawn = tf.random.stateless_normal(tf.shape(noise), seed=[seed, TRUNCATION_SALT + round_index])
        noise = tf.where(outside, redrawn, noise)
    return tf.clip_by_value(noise, -psi, psi)


def slerp(start, end, fractions) -> np.ndarray:
    """Spherical interpolation from `start` to `end` ([..., D]) at each of `fractions` ([T]).

    Returns [..., T, D]. The path follows the great circle between the two directions, with
    weights sin((1-t)w)/sin(w) and sin(tw)/sin(w) for the angle w between them; for vectors of
    equal norm it keeps that norm, unlike a straight line, which cuts through the low-density
    centre of a Gaussian latent. Parallel, antiparallel or zero vectors (sin(w) ~ 0) fall back
    to linear interpolation.
    """
    a = np.asarray(start, dtype=np.float64)
    b = np.asarray(end, dtype=np.float64)
    t = np.asarray(fractions, dtype=np.float64)
    if a.shape != b.shape or a.ndim < 1 or t.ndim != 1:
        raise ValueError(f"slerp needs start and end of one shape [..., D] and fractions [T]; got "
                         f"{a.shape}, {b.shape} and {t.shape}.")
    norms = np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1)
    cosine = np.sum(a * b, axis=-1) / np.where(norms > 0, norms, 1.0)
    omega = np.arccos(np.clip(cosine, -1.0, 1.0))[..., None, None]
    sine = np.sin(omega)
    linear = sine < 1e-6
    safe_sine = np.where(linear, 1.0, sine)
    t = t[:, None]
    start_weight = np.where(linear, 1.0 - t, np.sin((1.0 - t) * omega) / safe_sine)
    end_weight = np.where(linear, t, np.sin(t * omega) / safe_sine)
    return start_weight * a[..., None, :] + end_weight * b[..., None, :]


def interpolation_noise(endpoints: np.ndarray, steps: int) -> np.ndarray:
    """[2P, D] endpoints (pairs 2i, 2i+1) -> [P * steps, D] float32: row i of the grid walks
    from endpoint 2i to 2i+1 in `steps` slerp steps, both ends included."""
    pairs = np.asarray(endpoints).reshape(-1, 2, endpoints.shape[-1])
    path = slerp(pairs[:, 0], pairs[:, 1], np.linspace(0.0, 1.0, steps))
    return path.reshape(-1, endpoints.shape[-1]).astype(np.float32)


@dataclasses.dataclass(frozen=True)
class Draw:
    """What one `--mode=sample` call feeds the generator: noise [N, ...], class labels int32
    [N] (None for an unconditional run), and the rows of the image grid (None: automatic)."""

    noise: tf.Tensor
    labels: tf.Tensor | None
    rows: int | None


def requested_label(config: Config, *, run: Config, num_classes: int,
                    class_names: tuple[str, ...] | None) -> int | None:
    """`--label` as a class index (None when empty) for a run with `num_classes` classes
    (0: unconditional). ConfigError when the run is unconditional or the class is unknown."""
    if not config.label:
        return None
    if num_classes == 0:
        raise ConfigError(
            f"--label={config.label!r} picks a class, but the run in {config.logdir!r} "
            f"(--setup={run.setup}) is unconditional; drop --label, or sample a run trained with a "
            "class-conditional --setup.")
    return class_index(config.label, flag="label", num_classes=num_classes, class_names=class_names)


def plan_draw(config: Config, *, latent_shape: tuple[int, ...], num_classes: int = 0,
              label: int | None = None) -> Draw:
    """The noise, labels and grid rows of `--mode=sample` for a run with `num_classes` classes.

    Unconditional runs (0) and conditional runs with a `label` have the same layouts:
    `--num_samples` samples, a `--grid`, or `--num_samples` rows of `--interpolate` slerp steps;
    with a label every sample is of that class. A conditional run without a label draws one
    class per row: the plain and `--grid` layouts have `num_classes` rows (a `--grid` must say
    so) of `--num_samples // num_classes` (at least 1) or the grid's columns, and each column
    shares its noise, so it shows one latent vector across the classes; `--interpolate` row i
    walks within class i % num_classes. Noise is `sample_noise(--seed, ...)`, truncated first
    with `--truncation`, so `--label=Y --num_samples=N` draws what the exported `seed`
    signature returns for (seed, N, Y).
    """
    if num_classes < 0 or (label is not None and not 0 <= label < num_classes):
        raise ValueError(f"plan_draw needs num_classes >= 0 and a label in [0, num_classes) or "
                         f"None, got num_classes={num_classes!r}, label={label!r}.")
    grid = parse_grid(config.grid)
    per_class = num_classes > 0 and label is None
    if config.interpolate:
        rows = config.num_samples
        endpoints = _truncated_noise(config, 2 * rows, latent_shape).numpy()
        noise = tf.constant(interpolation_noise(endpoints, config.interpolate))
        row_labels = _labels(rows, num_classes, label)
        labels = None if row_labels is None else tf.repeat(row_labels, config.interpolate)
    elif per_class:
        if grid and grid[0] != num_classes:
            raise ConfigError(
                f"--grid={config.grid!r} is invalid: without --label a conditional run draws one "
                f"row per class; use --grid={num_classes}x{grid[1]}, or pick a class with --label.")
        rows = num_classes
        columns = grid[1] if grid else max(1, config.num_samples // num_classes)
        noise, labels = class_grid(_truncated_noise(config, columns, latent_shape), num_classes)
    else:
        rows, count = (grid[0], grid[0] * grid[1]) if grid else (None, config.num_samples)
        noise = _truncated_noise(config, count, latent_shape)
        labels = _labels(count, num_classes, label)
    return Draw(noise=noise, labels=labels, rows=rows)


def class_grid(column_noise: tf.Tensor, num_classes: int) -> tuple[tf.Tensor, tf.Tensor]:
    """(noise, int32 labels) of a class-by-noise grid in row-major order: row r is class r,
    column c is `column_noise[c]` in every row, so a column shows what only the label changes."""
    columns = column_noise.shape[0]
    noise = tf.tile(column_noise, [num_classes] + [1] * (column_noise.shape.rank - 1))
    return noise, tf.repeat(tf.range(num_classes, dtype=tf.int32), columns)


def _truncated_noise(config: Config, count: int, latent_shape: tuple[int, ...]) -> tf.Tensor:
    noise = sample_noise(config.seed, count, latent_shape)
    if config.truncation > 0:
        noise = truncate_noise(noise, psi=config.truncation, seed=config.seed)
    return noise


def _labels(count: int, num_classes: int, label: int | None) -> tf.Tensor | None:
    """None for an unconditional run (num_classes 0); else `label` `count` times, or the
    classes in turn (i % num_classes) when it is None."""
    if num_classes == 0:
        return None
    if label is not None:
        return tf.fill([count], tf.constant(label, tf.int32))
    return tf.range(count, dtype=tf.int32) % num_classes
