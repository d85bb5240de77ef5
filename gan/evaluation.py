"""Evaluating a generator: stream its samples and the real data through a feature extractor once,
batch by batch, and turn the features into metric values (`gan.metrics`).

The real side is reduced to a `Reference` that can be computed once and reused (periodic
evaluation during training); the fake side is drawn from a fixed, seeded noise set, so
successive evaluations of one run differ only by the generator. The extractor is the domain
evaluator (`gan.evaluator`) or Inception (`gan.features`); replay samplers put real images on
the generated side to measure the metrics' floor.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np
import tensorflow as tf

from gan import metrics
from gan.features import FeatureExtractor

# Evaluation noise is keyed by (seed, this salt), apart from the trainer's and sampler's keys.
EVAL_NOISE_SALT = 7919

# Samples per toy evaluation, as in the mode-collapse literature (VEEGAN, PacGAN).
TOY_SAMPLES = 2500


@dataclasses.dataclass(frozen=True)
class Reference:
    """The real side of the image metrics: features, their Gaussian statistics, the
    classifier's predicted classes (None when the extractor has no logits), and the examples'
    true labels (None when the data has none), which the class-conditional metrics group by."""

    features: np.ndarray
    stats: metrics.GaussianStats
    classes: np.ndarray | None
    labels: np.ndarray | None = None

    @property
    def count(self) -> int:
        return self.features.shape[0]


def real_reference(real: tf.data.Dataset, extractor: FeatureExtractor, *, num_samples: int,
                   batch_size: int = 250) -> Reference:
    """Streams the first `num_samples` of `real` (unbatched images, or {"x", "label"} examples
    as `load_split` yields them; only the latter give `labels`) through `extractor` once."""
    if num_samples < 2:
        raise ValueError(f"num_samples={num_samples!r}: the metrics need at least 2 samples.")
    if isinstance(real.element_spec, dict):
        real = real.map(lambda example: {key: example[key] for key in ("x", "label")
                                         if key in example})
    else:
        real = real.map(lambda images: {"x": images})
    features, classes, labels = [], [], []
    stats = metrics.GaussianStats(extractor.feature_dim)
    for batch in real.take(num_samples).batch(batch_size):
        _add_batch(extractor, batch["x"], stats, features, classes)
        if "label" in batch:
            labels.append(batch["label"].numpy())
    if stats.count < num_samples:
        raise ValueError(
            f"The real data holds only {stats.count} examples, fewer than num_samples="
            f"{num_samples}; ask for at most {stats.count} or use a larger split."
        )
    return Reference(np.concatenate(features), stats, np.concatenate(classes) if classes else None,
                     np.concatenate(labels) if labels else None)


def evaluate_generator(sample: Callable[..., tf.Tensor], *,
                       latent_shape: tuple[int, ...], reference: Reference,
                       extractor: FeatureExtractor, num_samples: int = 10_000,
                       batch_size: int = 250, seed: int = 0, kid_subsets: int = 100,
                       kid_subset_size: int = 1000, is_splits: int = 10,
                       k: int = 3, num_classes: int = 0) -> dict[str, float | list[float]]:
    """Metrics of `num_samples` images `sample(noise)` draws from normal noise keyed by `seed`.

    Keys: fid, kid, kid_std, precision, recall, and, when the extractor has logits,
    inception_score, inception_score_std, coverage, class_kl (see `gan.metrics`).

    A conditional generator (`num_classes` > 0) is called as `sample(noise, labels)` with
    int32 labels i % num_classes, so the set is class-balanced and the metrics above describe
    the same images; then intra_fid and intra_fid_per_class (each class's ~num_samples /
    num_classes images against the reference's images of that true label) are added, and
    class_accuracy when the extractor classifies into exactly `num_classes` classes (the
    domain evaluator does; Inception's ImageNet classes are not the dataset's).
    """
    if reference.features.shape[1] != extractor.feature_dim:
        raise ValueError(
            f"The reference has {reference.features.shape[1]}-d features but "
            f"{extractor.description} gives {extractor.feature_dim}-d ones; build the reference "
            "with the same extractor."
        )
    if num_classes and reference.labels is None:
        raise ValueError(
            f"num_classes={num_classes}: the class-conditional metrics need the reference's true "
            "labels; build it from {'x', 'label'} examples."
        )
    features, logits, stats = [], [], metrics.GaussianStats(extractor.feature_dim)
    for images in generate(sample, latent_shape, num_samples, batch_size, seed, num_classes):
        _add_batch(extractor, images, stats, features, logits, keep_logits=True)
    fake = np.concatenate(features)
    kid, kid_std = metrics.kernel_inception_distance(
        reference.features, fake, num_subsets=kid_subsets, subset_size=kid_subset_size, seed=seed)
    precision, recall = metrics.precision_recall(reference.features, fake, k=k)
    results = {"fid": metrics.fid_from_stats(reference.stats, stats), "kid": kid,
               "kid_std": kid_std, "precision": precision, "recall": recall}
    logits = np.concatenate(logits) if logits else None
    if logits is not None and reference.classes is not None:
        score, score_std = metrics.inception_score(logits, splits=is_splits)
        coverage, class_kl = metrics.class_coverage(
            np.argmax(logits, axis=1), reference.classes, num_classes=extractor.num_classes)
        results.update(inception_score=score, inception_score_std=score_std,
                       coverage=coverage, class_kl=class_kl)
    if num_classes:
        labels = np.arange(num_samples) % num_classes
        results["intra_fid"], results["intra_fid_per_class"] = metrics.intra_fid(
            reference.features, reference.labels, fake, labels, num_classes=num_classes)
        if logits is not None and extractor.num_classes == num_classes:
            results["class_accuracy"] = metrics.class_accuracy(np.argmax(logits, axis=1), labels)
    return results


def evaluate_images(real: tf.data.Dataset, sample: Callable[[tf.Tensor], tf.Tensor], *,
                    latent_shape: tuple[int, ...], extractor: FeatureExtractor,
                    num_samples: int = 10_000, batch_size: int = 250, seed: int = 0,
                    **options) -> dict[str, float]:
    """`real_reference` then `evaluate_generator` with `num_samples` on each side; `options`
    are evaluate_generator's metric settings (kid_subsets, kid_subset_size, is_splits, k)."""
    reference = real_reference(real, extractor, num_samples=num_samples, batch_size=batch_size)
    return evaluate_generator(sample, latent_shape=latent_shape, reference=reference,
                              extractor=extractor, num_samples=num_samples,
                              batch_size=batch_size, seed=seed, **options)


def evaluate_toy_generator(sample: Callable[[tf.Tensor], tf.Tensor], *,
                           latent_shape: tuple[int, ...], modes, std: float,
                           num_samples: int = TOY_SAMPLES, seed: int = 0) -> dict[str, float]:
    """{"modes": modes captured, "high_quality": fraction} of `num_samples` generated points
    (`metrics.toy_mode_metrics`); modes and std as `datasets.toys.toy_modes` gives them."""
    points = np.concatenate(list(generate(sample, latent_shape, num_samples, num_samples, seed)))
    captured, high_quality = metrics.toy_mode_metrics(points, modes=modes, std=std)
    return {"modes": captured, "high_quality": high_quality}


def replay_sampler(images: np.ndarray) -> Callable[[tf.Tensor], tf.Tensor]:
    """A stand-in 'generator' that returns `images` in order, whatever the noise: it puts real
    images on the generated side (the real-vs-real floor of the metrics)."""
    position = [0]

    def sample(noise):
        start = position[0]
        position[0] += noise.shape[0]
        return tf.constant(images[start : start + noise.shape[0]])

    return sample


def class_replay_sampler(images: np.ndarray,
                         labels: np.ndarray) -> Callable[[tf.Tensor, tf.Tensor], tf.Tensor]:
    """A stand-in conditional generator: for each requested label, the next image of that class
    in `images` (`labels` gives their classes), whatever the noise. It puts real images of the
    asked class on the generated side: the real-vs-real floor of class accuracy and intra-FID.
    """
    labels = np.asarray(labels).reshape(-1)
    if len(images) != labels.size:
        raise ValueError(f"class_replay_sampler needs one label per image, got {labels.size} "
                         f"labels for {len(images)} images.")
    members = {label: np.flatnonzero(labels == label) for label in np.unique(labels)}
    used = dict.fromkeys(members, 0)

    def sample(noise, wanted):
        rows = []
        for label in np.asarray(wanted).tolist():
            available = members.get(label, ())
            if used.get(label, 0) >= len(available):
                raise ValueError(f"class_replay_sampler has only {len(available)} images of class "
                                 f"{label}; give it more images of every class.")
            rows.append(available[used[label]])
            used[label] += 1
        return tf.constant(images[rows])

    return sample


def generate(sample, latent_shape, num_samples: int, batch_size: int, seed: int,
              num_classes: int = 0):
    """Batches of sample(noise) over one noise set drawn whole, so the samples depend on
    (seed, num_samples) and not on the batch size; sample(noise, labels) with labels
    i % num_classes for a conditional generator (num_classes > 0)."""
    if num_samples < 2 or batch_size < 1 or num_classes < 0:
        raise ValueError(
            f"Evaluation needs num_samples >= 2, batch_size >= 1 and num_classes >= 0, got "
            f"{num_samples!r}, {batch_size!r} and {num_classes!r}."
        )
    noise = tf.random.stateless_normal([num_samples, *latent_shape], seed=[seed, EVAL_NOISE_SALT])
    for start in range(0, num_samples, batch_size):
        batch = noise[start : start + batch_size]
        if num_classes:
            labels = tf.range(start, start + batch.shape[0], dtype=tf.int32) % num_classes
            outputs = sample(batch, labels)
        else:
            outputs = sample(batch)
        if not bool(tf.reduce_all(tf.math.is_finite(outputs))):
            raise ValueError(
                "The generator produced NaN or Inf samples; it has diverged, so there is "
                "nothing to evaluate."
            )
        yield outputs


def _add_batch(extractor, images, stats, features, outputs, keep_logits=False) -> None:
    """Adds one image batch's features to `stats` and `features`, and its logits (or, for the
    real side, predicted classes) to `outputs`."""
    batch_features, batch_logits = extractor.outputs(images)
    stats.update(batch_features)
    features.append(batch_features)
    if batch_logits is not None:
        outputs.append(batch_logits if keep_logits else np.argmax(batch_logits, axis=1))
