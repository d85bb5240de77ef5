import itertools
import math

import numpy as np
import pytest
import tensorflow as tf

from datasets import toys
from datasets.errors import DatasetError


def _sample(name: str, *, seed: int, count: int, split: str = "train") -> dict[str, np.ndarray]:
    stream = toys.toy_stream(name, split=split, seed=seed)
    return next(stream.batch(count).as_numpy_iterator())


def test_ring8_modes_are_on_the_unit_circle_at_multiples_of_45_degrees():
    modes, std = toys.toy_modes("ring8")

    assert modes.shape == (8, 2) and modes.dtype == np.float32
    assert std == 0.01
    for k, (x, y) in enumerate(modes):
        assert x == pytest.approx(math.cos(2 * math.pi * k / 8), abs=1e-6)
        assert y == pytest.approx(math.sin(2 * math.pi * k / 8), abs=1e-6)


def test_grid25_modes_are_the_even_lattice_from_minus_4_to_4():
    modes, std = toys.toy_modes("grid25")

    assert modes.shape == (25, 2) and modes.dtype == np.float32
    assert std == 0.05
    expected = set(itertools.product([-4.0, -2.0, 0.0, 2.0, 4.0], repeat=2))
    assert {tuple(mode) for mode in modes.tolist()} == expected


@pytest.mark.parametrize("name", toys.TOY_NAMES)
def test_samples_sit_on_their_labelled_mode_with_the_specified_std(name):
    modes, std = toys.toy_modes(name)
    sample = _sample(name, seed=3, count=4000)

    distances = np.linalg.norm(sample["x"][:, None, :] - modes[None], axis=-1)
    np.testing.assert_array_equal(distances.argmin(axis=1), sample["label"])
    assert distances.min(axis=1).max() < 6 * std
    offsets = sample["x"] - modes[sample["label"]]
    np.testing.assert_allclose(offsets.std(axis=0), [std, std], rtol=0.05)
    np.testing.assert_allclose(offsets.mean(axis=0), [0.0, 0.0], atol=4 * std / math.sqrt(4000))
    counts = np.bincount(sample["label"], minlength=len(modes))
    assert len(counts) == len(modes) and counts.min() > 0.6 * 4000 / len(modes)


def test_stream_is_a_pure_function_of_seed_and_split():
    first = _sample("ring8", seed=7, count=2500)  # spans three chunks
    again = _sample("ring8", seed=7, count=2500)
    other_seed = _sample("ring8", seed=8, count=2500)
    test_split = _sample("ring8", seed=7, count=2500, split="test")

    np.testing.assert_array_equal(first["x"], again["x"])
    np.testing.assert_array_equal(first["label"], again["label"])
    assert not np.allclose(first["x"], other_seed["x"])
    assert not np.allclose(first["x"], test_split["x"])


def test_stream_is_infinite_with_static_example_shapes():
    stream = toys.toy_stream("grid25", split="train", seed=0)

    assert stream.cardinality() == tf.data.INFINITE_CARDINALITY
    x_spec, label_spec = stream.element_spec["x"], stream.element_spec["label"]
    assert x_spec.shape == (2,) and x_spec.dtype == tf.float32
    assert label_spec.shape == () and label_spec.dtype == tf.int64


def test_unknown_toy_and_split_are_dataset_errors():
    with pytest.raises(DatasetError, match="--dataset='ring9'.*ring8, grid25"):
        toys.toy_modes("ring9")
    with pytest.raises(DatasetError, match="split='validation'.*'train' or 'test'"):
        toys.toy_stream("ring8", split="validation", seed=0)
