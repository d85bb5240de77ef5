"""Sample-quality metrics: FID, KID, Inception Score, precision/recall, class coverage, toy modes,
and for conditional generators class accuracy and intra-FID.

Every function is pure (arrays in, Python numbers out) and computes in float64: FID subtracts
traces of similar size and KID sums a million kernel values whose differences are the signal,
so float32 rounding would be of the order of the values a good generator reaches.

Features and logits come from a feature extractor (`gan.evaluator`). The extractor is part of
the metric: numbers from the domain evaluator, from Inception and from two differently trained
evaluators are not comparable with each other, and neither are numbers computed from different
sample counts (FID and KID's spread depend on N). `GaussianStats` accumulates FID's sufficient
statistics batch by batch; the other metrics need the feature sets themselves.
"""

from __future__ import annotations

import math

import numpy as np
import tensorflow as tf

# A reference class frequency of zero would make the class KL infinite for one stray sample.
_MIN_REFERENCE_FREQUENCY = 1e-10


class GaussianStats:
    """Streaming mean and covariance of feature batches, for FID.

    Batches are merged with the pairwise update of Chan et al. (1979), which keeps centred
    scatter sums instead of raw sums of x and x x^T: E[x x^T] - mu mu^T cancels catastrophically
    when features have large means relative to their spread.
    """

    def __init__(self, dim: int):
        if dim < 1:
            raise ValueError(f"GaussianStats needs a feature dimension >= 1, got {dim!r}.")
        self.dim = dim
        self.count = 0
        self._mean = tf.zeros([dim], tf.float64)
        self._scatter = tf.zeros([dim, dim], tf.float64)

    def update(self, features) -> None:
        """Adds a batch of feature vectors [n, dim]."""
        x = _matrix(features, "features")
        if x.shape[1] != self.dim:
            raise ValueError(
                f"GaussianStats was built for {self.dim}-d features, got a batch of shape "
                f"{tuple(x.shape)}; use one extractor for a whole set."
            )
        n = x.shape[0]
        if n == 0:
            return
        batch_mean = tf.reduce_mean(x, axis=0)
        centred = x - batch_mean
        total = self.count + n
        delta = batch_mean - self._mean
        self._mean = self._mean + delta * (n / total)
        self._scatter = (
            self._scatter
            + tf.matmul(centred, centred, transpose_a=True)
            + tf.tensordot(delta, delta, axes=0) * (self.count * n / total)
        )
        self.count = total

    @property
    def mean(self) -> tf.Tensor:
        return self._mean

    @property
    def covariance(self) -> tf.Tensor:
        """The unbiased sample covariance (divides by count - 1)."""
        if self.count < 2:
            raise ValueError(
                f"A covariance needs at least 2 feature vectors, got {self.count}; "
                "evaluate more samples."
            )
        return self._scatter / (self.count - 1)


def frechet_distance(mean1, cov1, mean2, cov2) -> float:
    """||mu1 - mu2||^2 + Tr(S1 + S2 - 2 (S1^1/2 S2 S1^1/2)^1/2), the FID of two Gaussians.

    Tr((S1 S2)^1/2) is computed as the trace of the square root of the symmetric PSD matrix
    S1^1/2 S2 S1^1/2 (similar to S1 S2, so same eigenvalues) through `eigh`, with rounding-level
    negative eigenvalues clipped to 0: no complex intermediate results, and singular covariances
    (fewer samples than dimensions, dead ReLU features) are fine. The result is clipped at 0,
    which only removes rounding error (FID of identical statistics is exactly 0).
    """
    mu1, mu2 = _vector(mean1, "mean1"), _vector(mean2, "mean2")
    s1, s2 = _matrix(cov1, "cov1"), _matrix(cov2, "cov2")
    dim = mu1.shape[0]
    for name, value in (("mean2", mu2), ("cov1", s1), ("cov2", s2)):
        expected = (dim,) if name == "mean2" else (dim, dim)
        if tuple(value.shape) != expected:
            raise ValueError(
                f"frechet_distance: {name} has shape {tuple(value.shape)}, expected {expected} "
                f"to match mean1; both statistics must come from the same extractor."
            )
    root1 = _psd_sqrt(s1)
    middle = _symmetric(root1 @ s2 @ root1)
    trace_root = tf.reduce_sum(tf.sqrt(tf.maximum(tf.linalg.eigvalsh(middle), 0.0)))
    diff = mu1 - mu2
    value = (
        tf.tensordot(diff, diff, axes=1)
        + tf.linalg.trace(s1)
        + tf.linalg.trace(s2)
        - 2.0 * trace_root
    )
    return max(float(value), 0.0)


def fid_from_stats(real: GaussianStats, fake: GaussianStats) -> float:
    """`frechet_distance` of two accumulated feature sets."""
    return frechet_distance(real.mean, real.covariance, fake.mean, fake.covariance)


def kernel_inception_distance(
    real, fake, *, num_subsets: int = 100, subset_size: int = 1000, seed: int = 0
) -> tuple[float, float]:
    """KID (Binkowski et al. 2018): mean and std over subsets of the unbiased MMD^2.

    Kernel k(x, y) = (x.y / d + 1)^3. Each subset draws `subset_size` rows of each set without
    replacement (fewer when a set is smaller), keyed by (seed, subset index), so the value is a
    pure function of its inputs. The estimator is unbiased, so equal distributions give values
    scattered around 0, slightly negative ones included.
    """
    x, y = _feature_pair(real, fake, "KID")
    if num_subsets < 1 or subset_size < 2:
        raise ValueError(
            f"KID needs num_subsets >= 1 and subset_size >= 2, got {num_subsets!r} and "
            f"{subset_size!r}."
        )
    size = min(subset_size, x.shape[0], y.shape[0])
    if size < 2:
        raise ValueError(
            f"KID needs at least 2 samples per set, got {x.shape[0]} real and {y.shape[0]} fake."
        )
    values = []
    for subset in range(num_subsets):
        real_key, fake_key = _subset_keys(seed, subset)
        values.append(
            float(
                _unbiased_mmd2(
                    tf.gather(x, _random_subset(x.shape[0], size, real_key)),
                    tf.gather(y, _random_subset(y.shape[0], size, fake_key)),
                )
            )
        )
    values = np.asarray(values, dtype=np.float64)
    return float(values.mean()), float(values.std())


def inception_score(logits, *, splits: int = 10) -> tuple[float, float]:
    """exp(E_x[KL(p(y|x) || p(y))]) over `splits` consecutive chunks: (mean, std).

    p(y) is the chunk's mean prediction. Bounds: 1 (every sample predicts the same
    distribution) to C (confident predictions spread evenly over C classes). Chunk sizes differ
    by at most one when N is not a multiple of `splits`.
    """
    log_p = tf.nn.log_softmax(_matrix(logits, "logits"), axis=1)
    count = log_p.shape[0]
    if splits < 1 or count < splits:
        raise ValueError(
            f"inception_score needs 1 <= splits <= N, got splits={splits!r} for N={count}."
        )
    scores = []
    for chunk in np.array_split(np.arange(count), splits):
        chunk_log_p = tf.gather(log_p, chunk)
        p = tf.exp(chunk_log_p)
        log_marginal = tf.math.log(tf.reduce_mean(p, axis=0))
        kl = tf.reduce_sum(p * (chunk_log_p - log_marginal), axis=1)
        scores.append(math.exp(float(tf.reduce_mean(kl))))
    scores = np.asarray(scores)
    return float(scores.mean()), float(scores.std())


def precision_recall(real, fake, *, k: int = 3, batch_size: int = 1000) -> tuple[float, float]:
    """Improved precision and recall (Kynkaanniemi et al. 2019) with k-NN manifolds.

    A set's manifold is the union of balls around its points, each with the radius of the
    point's k-th nearest neighbour in the same set (itself excluded). Precision: the fraction of
    fake samples inside the real manifold; recall: the fraction of real samples inside the fake
    manifold. Distances are computed in blocks of `batch_size` rows, never all at once.
    """
    x, y = _feature_pair(real, fake, "precision_recall")
    if k < 1 or batch_size < 1:
        raise ValueError(
            f"precision_recall needs k >= 1 and batch_size >= 1, got {k!r} and {batch_size!r}."
        )
    if min(x.shape[0], y.shape[0]) <= k:
        raise ValueError(
            f"precision_recall with k={k} needs more than {k} samples per set, got "
            f"{x.shape[0]} real and {y.shape[0]} fake."
        )
    precision = _fraction_inside(y, x, _knn_radii(x, k, batch_size), batch_size)
    recall = _fraction_inside(x, y, _knn_radii(y, k, batch_size), batch_size)
    return precision, recall


def class_coverage(fake_classes, reference_classes, *, num_classes: int) -> tuple[float, float]:
    """(coverage, KL(fake class histogram || reference class histogram)).

    Classes are the classifier's argmax predictions. Coverage: the fraction of the classes that
    occur in the reference that are predicted for at least one fake sample. The reference is
    meant to be the classifier's predictions on real data rather than the true labels, so that
    the classifier's own confusions cancel and a perfect generator scores KL 0. Reference
    frequencies are floored at 1e-10, so a class the reference never shows costs a large, finite
    KL.
    """
    if num_classes < 1:
        raise ValueError(f"class_coverage needs num_classes >= 1, got {num_classes!r}.")
    fake_hist = _class_histogram(fake_classes, num_classes, "fake_classes")
    reference_hist = _class_histogram(reference_classes, num_classes, "reference_classes")
    present = reference_hist > 0
    coverage = float(np.count_nonzero((fake_hist > 0) & present) / np.count_nonzero(present))
    predicted = fake_hist > 0
    reference = np.maximum(reference_hist[predicted], _MIN_REFERENCE_FREQUENCY)
    kl = float(np.sum(fake_hist[predicted] * np.log(fake_hist[predicted] / reference)))
    return coverage, kl


def class_accuracy(predicted_classes, labels) -> float:
    """The fraction of generated samples the classifier assigns to the class they were
    generated for: how well a conditional generator obeys its label (AC-GAN's measure, Odena et
    al. 2017). The classifier's own test error caps it: a generator that reproduces real images
    of the asked class scores the classifier's test accuracy, not 1.
    """
    predicted = _class_indices(predicted_classes, "predicted_classes")
    wanted = _class_indices(labels, "labels")
    if predicted.shape != wanted.shape:
        raise ValueError(
            f"class_accuracy needs one prediction per label, got {predicted.size} predictions "
            f"for {wanted.size} labels."
        )
    return float(np.mean(predicted == wanted))


def intra_fid(real, real_labels, fake, fake_labels, *,
              num_classes: int) -> tuple[float, list[float]]:
    """(mean, per-class list) of the FID between each class's real and generated features.

    Intra-FID (Miyato & Koyama 2018) scores a conditional generator class by class: one that
    draws good images of the wrong classes, or ignores its labels, can have a good FID but not
    a good intra-FID. Each class needs at least 2 features on each side. With n features per
    class, FID's positive small-sample bias is that of n, not of the whole set: compare values
    only at equal per-class counts.
    """
    x, y = _feature_pair(real, fake, "intra_fid")
    x_labels = _class_indices(real_labels, "real_labels")
    y_labels = _class_indices(fake_labels, "fake_labels")
    if x_labels.size != x.shape[0] or y_labels.size != y.shape[0]:
        raise ValueError(
            f"intra_fid needs one label per feature vector, got {x_labels.size} labels for "
            f"{x.shape[0]} real and {y_labels.size} for {y.shape[0]} generated vectors."
        )
    if num_classes < 1:
        raise ValueError(f"intra_fid needs num_classes >= 1, got {num_classes!r}.")
    per_class = []
    for label in range(num_classes):
        sides = []
        for features, labels, side in ((x, x_labels, "real"), (y, y_labels, "generated")):
            members = np.flatnonzero(labels == label)
            if members.size < 2:
                raise ValueError(
                    f"intra_fid needs at least 2 {side} samples of every class; class {label} "
                    f"has {members.size}: evaluate more samples."
                )
            stats = GaussianStats(features.shape[1])
            stats.update(tf.gather(features, members))
            sides.append(stats)
        per_class.append(fid_from_stats(*sides))
    return float(np.mean(per_class)), per_class


def toy_mode_metrics(samples, *, modes, std: float, threshold: float = 3.0) -> tuple[int, float]:
    """(modes captured, fraction of high-quality samples) for 2-D mixture toys.

    As in VEEGAN (Srivastava et al. 2017) and ALI (Dumoulin et al. 2017): a sample is high
    quality when it lies within `threshold` (3) standard deviations of its nearest mode
    (Euclidean distance); a mode is captured when it is the nearest mode of at least one
    high-quality sample. The papers evaluate 2,500 samples; multiply the fraction by 100 for
    their percentages.
    """
    points, centres = _matrix(samples, "samples"), _matrix(modes, "modes")
    if points.shape[1] != centres.shape[1] or points.shape[0] == 0:
        raise ValueError(
            f"toy_mode_metrics needs samples [N>0, d] and modes [M, d] of one d, got "
            f"{tuple(points.shape)} and {tuple(centres.shape)}."
        )
    if std <= 0 or threshold <= 0:
        raise ValueError(
            f"toy_mode_metrics needs std > 0 and threshold > 0, got {std!r} and {threshold!r}."
        )
    squared = _squared_distances(points, centres)
    nearest = tf.argmin(squared, axis=1)
    high_quality = tf.sqrt(tf.reduce_min(squared, axis=1)) <= threshold * std
    captured = np.unique(tf.boolean_mask(nearest, high_quality).numpy()).size
    return int(captured), float(tf.reduce_mean(tf.cast(high_quality, tf.float64)))


@tf.function(reduce_retracing=True)
def _unbiased_mmd2(x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
    # Compiled: a hundred eager subsets cost five times as much in op dispatch.
    m = tf.cast(tf.shape(x)[0], tf.float64)
    dim = tf.cast(tf.shape(x)[1], tf.float64)

    def kernel(a, b):
        return (tf.matmul(a, b, transpose_b=True) / dim + 1.0) ** 3

    k_xx, k_yy = kernel(x, x), kernel(y, y)
    within = (
        tf.reduce_sum(k_xx) - tf.linalg.trace(k_xx) + tf.reduce_sum(k_yy) - tf.linalg.trace(k_yy)
    ) / (m * (m - 1.0))
    return within - 2.0 * tf.reduce_mean(kernel(x, y))


def _subset_keys(seed: int, subset: int) -> tuple[tf.Tensor, tf.Tensor]:
    key = tf.constant([seed, subset], tf.int64)
    return tuple(tf.unstack(tf.random.experimental.stateless_split(key, 2)))


def _random_subset(count: int, size: int, key: tf.Tensor) -> tf.Tensor:
    return tf.argsort(tf.random.stateless_uniform([count], key))[:size]


def _knn_radii(points: tf.Tensor, k: int, batch_size: int) -> tf.Tensor:
    """Squared distance of each point to its k-th nearest other point."""
    radii = []
    for start in range(0, points.shape[0], batch_size):
        block = _squared_distances(points[start : start + batch_size], points)
        # The k+1 smallest include the point itself at distance 0.
        radii.append(-tf.math.top_k(-block, k=k + 1).values[:, k])
    return tf.concat(radii, axis=0)


def _fraction_inside(
    queries: tf.Tensor, points: tf.Tensor, radii: tf.Tensor, batch_size: int
) -> float:
    """The fraction of `queries` within the squared radius of at least one of `points`."""
    inside = 0
    for start in range(0, queries.shape[0], batch_size):
        block = _squared_distances(queries[start : start + batch_size], points)
        inside += int(tf.math.count_nonzero(tf.reduce_any(block <= radii[None, :], axis=1)))
    return inside / queries.shape[0]


def _squared_distances(a: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
    squared = (
        tf.reduce_sum(a * a, axis=1)[:, None]
        - 2.0 * tf.matmul(a, b, transpose_b=True)
        + tf.reduce_sum(b * b, axis=1)[None, :]
    )
    return tf.maximum(squared, 0.0)


def _class_histogram(classes, num_classes: int, name: str) -> np.ndarray:
    values = _class_indices(classes, name)
    if values.min() < 0 or values.max() >= num_classes:
        raise ValueError(
            f"{name} holds classes outside [0, {num_classes}): min {values.min()}, max "
            f"{values.max()}; pass the classifier's num_classes."
        )
    return np.bincount(values, minlength=num_classes) / values.size


def _class_indices(values, name: str) -> np.ndarray:
    indices = np.asarray(values).reshape(-1)
    if indices.size == 0 or not np.issubdtype(indices.dtype, np.integer):
        raise ValueError(
            f"{name} must be a non-empty array of integer class indices, got {indices.size} "
            f"values of dtype {indices.dtype}."
        )
    return indices


def _psd_sqrt(matrix: tf.Tensor) -> tf.Tensor:
    eigenvalues, eigenvectors = tf.linalg.eigh(_symmetric(matrix))
    roots = tf.sqrt(tf.maximum(eigenvalues, 0.0))
    return (eigenvectors * roots[None, :]) @ tf.transpose(eigenvectors)


def _symmetric(matrix: tf.Tensor) -> tf.Tensor:
    return 0.5 * (matrix + tf.transpose(matrix))


def _feature_pair(real, fake, metric: str) -> tuple[tf.Tensor, tf.Tensor]:
    """Both feature sets as float64 [N, D] matrices of one feature size."""
    x, y = _matrix(real, "real"), _matrix(fake, "fake")
    if x.shape[1] != y.shape[1]:
        raise ValueError(
            f"{metric} needs features of one size, got real {tuple(x.shape)} and fake "
            f"{tuple(y.shape)}; use one extractor for both sets."
        )
    return x, y


def _matrix(values, name: str) -> tf.Tensor:
    tensor = tf.convert_to_tensor(values)
    tensor = tf.cast(tensor, tf.float64)
    if tensor.shape.rank != 2:
        raise ValueError(f"{name} must be a 2-D array [N, D], got shape {tuple(tensor.shape)}.")
    return tensor


def _vector(values, name: str) -> tf.Tensor:
    tensor = tf.cast(tf.convert_to_tensor(values), tf.float64)
    if tensor.shape.rank != 1:
        raise ValueError(f"{name} must be a 1-D mean vector, got shape {tuple(tensor.shape)}.")
    return tensor
