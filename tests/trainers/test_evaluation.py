"""Which checkpoint `--eval_every` keeps as the best (`evaluation.selection_score`)."""

import pytest

from trainers import evaluation


def test_images_rank_by_fid():
    assert evaluation.selection_score({"fid": 12.5, "precision": 0.1}) == 12.5


def test_a_sharp_toy_generator_beats_a_blur_that_touches_more_modes():
    # grid25, measured: an early blurry generator touched 23 modes with 3.6% high-quality
    # samples; ranking by modes first kept it over a sharp one with 21 modes and 79%.
    blur = evaluation.selection_score({"modes": 23, "high_quality": 0.036}, num_modes=25)
    sharp = evaluation.selection_score({"modes": 21, "high_quality": 0.79}, num_modes=25)

    assert sharp < blur
    assert sharp == pytest.approx(-(21 / 25 + 0.79))


def test_one_of_eight_modes_is_worth_twelve_and_a_half_points_of_quality():
    all_modes = evaluation.selection_score({"modes": 8, "high_quality": 0.80}, num_modes=8)

    assert all_modes < evaluation.selection_score({"modes": 7, "high_quality": 0.92}, num_modes=8)
    assert all_modes > evaluation.selection_score({"modes": 7, "high_quality": 0.93}, num_modes=8)
