import math

import numpy as np
import pytest

from datasets.toys import toy_modes
from gan import metrics


def _gaussian(seed, count, dim, mean=0.0, scale=1.0):
    return np.random.default_rng(seed).normal(mean, scale, size=(count, dim))


def _rotation(dim, seed):
    q, _ = np.linalg.qr(np.random.default_rng(seed).normal(size=(dim, dim)))
    return q


# GaussianStats


def test_streamed_statistics_equal_whole_set_mean_and_covariance():
    features = _gaussian(0, 103, 5, mean=1e4, scale=0.01)
    stats = metrics.GaussianStats(5)
    for start, stop in ((0, 1), (1, 40), (40, 40), (40, 103)):
        stats.update(features[start:stop])
    assert stats.count == 103
    np.testing.assert_allclose(stats.mean.numpy(), features.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(stats.covariance.numpy(), np.cov(features, rowvar=False),
                               rtol=1e-6, atol=1e-14)


def test_statistics_reject_too_few_samples_and_wrong_width():
    stats = metrics.GaussianStats(3)
    stats.update(np.zeros((1, 3)))
    with pytest.raises(ValueError, match="at least 2"):
        stats.covariance
    with pytest.raises(ValueError, match="3-d features"):
        stats.update(np.zeros((4, 2)))


# FID


def test_fid_of_identical_sets_is_zero():
    features = _gaussian(1, 300, 16)
    real, fake = metrics.GaussianStats(16), metrics.GaussianStats(16)
    real.update(features)
    fake.update(features[::-1])
    assert metrics.fid_from_stats(real, fake) == pytest.approx(0.0, abs=1e-9)


def test_fid_of_diagonal_gaussians_is_closed_form():
    # ||mu1 - mu2||^2 = 1 + 0 + 4; sum (sqrt(a) - sqrt(b))^2 = 1 + 1 + 6.25.
    value = metrics.frechet_distance([0.0, 1.0, 2.0], np.diag([1.0, 4.0, 9.0]),
                                     [1.0, 1.0, 0.0], np.diag([4.0, 1.0, 0.25]))
    assert value == pytest.approx(13.25, rel=1e-12)


def test_fid_of_non_commuting_covariances_is_closed_form():
    # For 2x2 PSD M, Tr(M^1/2) = sqrt(Tr M + 2 sqrt(det M)); with M ~ S1 S2:
    # Tr(S1 S2) = 8 and det(S1) det(S2) = 9, so the trace term is sqrt(14).
    s1 = np.array([[2.0, 1.0], [1.0, 2.0]])
    s2 = np.array([[1.0, 0.0], [0.0, 3.0]])
    assert not np.allclose(s1 @ s2, s2 @ s1)
    value = metrics.frechet_distance([1.0, 0.0], s1, [0.0, 2.0], s2)
    assert value == pytest.approx(5.0 + 4.0 + 4.0 - 2.0 * math.sqrt(14.0), rel=1e-12)


def test_fid_of_rotated_gaussians_is_closed_form():
    a, b = np.arange(1.0, 9.0), np.linspace(0.5, 3.0, 8)
    q = _rotation(8, seed=2)
    value = metrics.frechet_distance(np.ones(8), q @ np.diag(a) @ q.T,
                                     np.zeros(8), q @ np.diag(b) @ q.T)
    assert value == pytest.approx(8.0 + np.sum((np.sqrt(a) - np.sqrt(b)) ** 2), rel=1e-10)


def test_fid_handles_singular_covariances():
    v = np.array([[1.0], [2.0], [0.0], [-1.0]])
    singular = v @ v.T
    assert metrics.frechet_distance(np.zeros(4), singular, np.full(4, 0.5), singular) == (
        pytest.approx(1.0, abs=1e-9))


def test_fid_from_samples_approaches_the_gaussians_fid():
    real = _gaussian(3, 20_000, 2)
    fake = _gaussian(4, 20_000, 2, mean=1.0, scale=2.0)
    stats = [metrics.GaussianStats(2), metrics.GaussianStats(2)]
    stats[0].update(real)
    stats[1].update(fake)
    # 2 * 1^2 + 2 * (1 - 2)^2
    assert metrics.fid_from_stats(*stats) == pytest.approx(4.0, abs=0.1)


def test_fid_rejects_mismatched_statistics():
    with pytest.raises(ValueError, match="cov2 has shape"):
        metrics.frechet_distance(np.zeros(2), np.eye(2), np.zeros(2), np.eye(3))


# KID


def test_kid_tiny_case_by_hand():
    # d = 1, k(x, y) = (x y + 1)^3. XX: k(0, 1) = 1; YY: k(1, 2) = 27;
    # XY: (1 + 1 + 8 + 27) / 4 = 9.25. MMD^2 = 1 + 27 - 2 * 9.25 = 9.5.
    kid, kid_std = metrics.kernel_inception_distance([[0.0], [1.0]], [[1.0], [2.0]],
                                                     num_subsets=1, subset_size=2)
    assert kid == pytest.approx(9.5, rel=1e-12)
    assert kid_std == 0.0


def test_kid_of_equal_distributions_is_near_zero_and_of_shifted_ones_positive():
    real, same = _gaussian(5, 600, 16), _gaussian(6, 600, 16)
    shifted = _gaussian(7, 600, 16, mean=0.5)
    options = dict(num_subsets=20, subset_size=300)
    kid_same, std_same = metrics.kernel_inception_distance(real, same, **options)
    kid_shift, _ = metrics.kernel_inception_distance(real, shifted, **options)
    assert abs(kid_same) < 0.01
    assert std_same > 0.0
    # (mean shift)^2-scale signal: MMD^2 for a 0.5 shift in 16-d is about 0.3 here.
    assert kid_shift > 0.1
    assert kid_shift > 20 * abs(kid_same)


def test_kid_is_a_pure_function_of_the_seed_and_clamps_the_subset_size():
    real, fake = _gaussian(8, 50, 4), _gaussian(9, 40, 4, mean=0.3)
    first = metrics.kernel_inception_distance(real, fake, num_subsets=3, subset_size=1000, seed=1)
    again = metrics.kernel_inception_distance(real, fake, num_subsets=3, subset_size=1000, seed=1)
    other = metrics.kernel_inception_distance(real, fake, num_subsets=3, subset_size=1000, seed=2)
    assert first == again
    assert first != other


def test_kid_rejects_mismatched_features():
    with pytest.raises(ValueError, match="one size"):
        metrics.kernel_inception_distance(np.zeros((5, 3)), np.zeros((5, 4)))


# Inception Score


def test_inception_score_of_confident_evenly_spread_predictions_is_the_class_count():
    logits = 100.0 * np.eye(10)[np.arange(200) % 10]
    score, spread = metrics.inception_score(logits, splits=4)
    assert score == pytest.approx(10.0, rel=1e-9)
    assert spread == pytest.approx(0.0, abs=1e-9)


def test_inception_score_of_one_class_or_uninformed_predictions_is_one():
    one_class = 100.0 * np.eye(10)[np.zeros(50, dtype=int)]
    assert metrics.inception_score(one_class, splits=5)[0] == pytest.approx(1.0, abs=1e-12)
    assert metrics.inception_score(np.zeros((50, 10)), splits=5)[0] == pytest.approx(1.0, abs=1e-12)


def test_inception_score_of_two_confident_classes_in_uneven_chunks():
    logits = 100.0 * np.eye(3)[np.arange(7) % 2]
    # Chunks [0,1,0,1], [0,1,0]: exp(log 2) and exp(H(2/3, 1/3)).
    entropy = -(2 / 3) * math.log(2 / 3) - (1 / 3) * math.log(1 / 3)
    assert metrics.inception_score(logits, splits=2)[0] == pytest.approx(
        (2.0 + math.exp(entropy)) / 2, rel=1e-9)


def test_inception_score_rejects_more_splits_than_samples():
    with pytest.raises(ValueError, match="splits=5 for N=3"):
        metrics.inception_score(np.zeros((3, 2)), splits=5)


# Precision and recall


def _clusters(seed, per_cluster, centres):
    rng = np.random.default_rng(seed)
    return np.concatenate([c + rng.normal(size=(per_cluster, len(c))) for c in centres])


CENTRES = 100.0 * np.eye(4)


def test_precision_recall_of_identical_sets_is_one():
    features = _gaussian(10, 120, 8)
    assert metrics.precision_recall(features, features.copy(), k=3) == (1.0, 1.0)


def test_precision_recall_of_a_copy_of_half_the_clusters():
    real = _clusters(11, 30, CENTRES)
    fake = real[:60]
    assert metrics.precision_recall(real, fake, k=3, batch_size=7) == (1.0, 0.5)


def test_precision_recall_of_fresh_samples_from_half_the_clusters():
    real = _clusters(12, 200, CENTRES)
    fake = _clusters(13, 400, CENTRES[:2])
    precision, recall = metrics.precision_recall(real, fake, k=3)
    assert precision > 0.9
    assert 0.4 < recall <= 0.5


def test_precision_recall_needs_more_samples_than_k():
    with pytest.raises(ValueError, match="more than 3 samples"):
        metrics.precision_recall(np.zeros((10, 2)), np.zeros((3, 2)), k=3)


# Class coverage


def test_coverage_and_kl_of_a_set_missing_half_the_classes():
    reference = np.arange(100) % 10
    fake = np.arange(50) % 5
    coverage, kl = metrics.class_coverage(fake, reference, num_classes=10)
    assert coverage == 0.5
    assert kl == pytest.approx(math.log(2.0), rel=1e-12)


def test_class_kl_of_an_uneven_histogram_is_closed_form():
    coverage, kl = metrics.class_coverage([0, 0, 0, 1], [0, 1], num_classes=2)
    assert coverage == 1.0
    assert kl == pytest.approx(0.75 * math.log(1.5) + 0.25 * math.log(0.5), rel=1e-12)


def test_coverage_counts_only_classes_the_reference_shows():
    coverage, _ = metrics.class_coverage([0, 1, 2], np.arange(90) % 9, num_classes=10)
    assert coverage == pytest.approx(3 / 9)


def test_coverage_rejects_classes_out_of_range():
    with pytest.raises(ValueError, match=r"outside \[0, 10\)"):
        metrics.class_coverage([0, 10], [0, 1], num_classes=10)


# 2-D toys


def test_toy_modes_and_high_quality_samples():
    modes, std = toy_modes("ring8")
    points = np.concatenate([
        modes[0] + np.array([[0.02, 0.0], [0.0, -0.02], [0.01, 0.01]]),
        modes[3] + np.array([[0.0, 0.029]]),  # high quality: 2.9 std away
        modes[5] + np.array([[0.031, 0.0]]),  # 3.1 std away: neither quality nor a capture
        np.zeros((1, 2)),
    ])
    assert metrics.toy_mode_metrics(points, modes=modes, std=std) == (2, pytest.approx(4 / 6))


def test_toy_metrics_of_every_grid_mode():
    modes, std = toy_modes("grid25")
    points = np.repeat(modes, 100, axis=0)
    assert metrics.toy_mode_metrics(points, modes=modes, std=std) == (25, 1.0)


@pytest.mark.parametrize("metric, call", [
    ("KID", lambda a, b: metrics.kernel_inception_distance(a, b, num_subsets=1, subset_size=2)),
    ("precision_recall", lambda a, b: metrics.precision_recall(a, b)),
])
def test_feature_sets_of_different_sizes_are_rejected(metric, call):
    with pytest.raises(ValueError, match=f"{metric} needs features of one size"):
        call(np.zeros((4, 3)), np.zeros((4, 5)))
