"""stacked_fashion_mnist: three Fashion-MNIST images of a split as RGB, labelled by their class
triple, the same examples in every run."""

import numpy as np
import pytest

from datasets import registry, stacked


def _whole(dataset):
    batches = list(dataset.batch(10_000).as_numpy_iterator())
    return {key: np.concatenate([batch[key] for batch in batches]) for key in batches[0]}


@pytest.fixture(scope="module")
def test_splits(fashion_mnist_data_dir):
    """(stacked test split, Fashion-MNIST's test split) at 28 px, whole."""
    return tuple(_whole(registry.load_split(name, split="test", data_dir=fashion_mnist_data_dir))
                 for name in (stacked.NAME, "fashion_mnist"))


def test_info_names_1000_classes_by_their_triples():
    info = registry.dataset_info(stacked.NAME)
    assert (info.kind, info.shape, info.num_classes, info.num_examples) == (
        "image", (28, 28, 3), 1000, 60_000)
    assert info.class_names[371] == "Dress+Sneaker+Trouser"
    assert registry.dataset_info(stacked.NAME, resolution=32).shape == (32, 32, 3)
    assert registry.channel_source(stacked.NAME) == "fashion_mnist"
    assert registry.channel_source("fashion_mnist") is None


def test_each_example_stacks_the_source_images_its_triple_names(test_splits):
    examples, source = test_splits
    chosen = stacked.triples("test", 10_000)
    assert examples["x"].shape == (10_000, 28, 28, 3) and examples["x"].dtype == np.float32
    assert examples["x"].min() == -1.0 and examples["x"].max() == 1.0
    for channel in range(3):
        np.testing.assert_array_equal(examples["x"][..., channel],
                                      source["x"][chosen[:, channel], ..., 0])
    assert examples["label"].tolist() == stacked.mode_index(source["label"][chosen]).tolist()


def test_the_channels_classes_are_independent(test_splits):
    """Two channels share a class in about 1 example of 10 (chance: Fashion-MNIST's test
    classes are balanced), not more: 1,000 expected of 10,000, binomial std 30."""
    classes = stacked.mode_classes(test_splits[0]["label"])
    for first, second in ((0, 1), (0, 2), (1, 2)):
        assert abs(np.sum(classes[:, first] == classes[:, second]) - 1000) < 120
    assert len(np.unique(test_splits[0]["label"])) == 1000


def test_the_triples_are_fixed_per_split_whatever_the_run():
    train = stacked.triples("train", 60_000)
    assert train.shape == (60_000, 3) and train.min() == 0 and train.max() == 59_999
    np.testing.assert_array_equal(train, stacked.triples("train", 60_000))
    assert not np.array_equal(train[:10_000] % 10_000, stacked.triples("test", 10_000))
    with pytest.raises(ValueError, match="split='validation'"):
        stacked.triples("validation", 10)


def test_32_px_stacks_the_resized_source_images(fashion_mnist_data_dir):
    examples, source = (
        next(registry.load_split(name, split="test", data_dir=fashion_mnist_data_dir,
                                 resolution=32).batch(10_000).as_numpy_iterator())
        for name in (stacked.NAME, "fashion_mnist"))
    assert examples["x"].shape == (10_000, 32, 32, 3)
    chosen = stacked.triples("test", 10_000)
    np.testing.assert_array_equal(examples["x"][..., 2], source["x"][chosen[:, 2], ..., 0])


def test_a_resumed_pipeline_continues_the_same_examples(monkeypatch):
    """The training pipeline rebuilds the examples on resume and skips the batches drawn: the
    stacked examples are the same every time, so batch 3 of a resumed stream is batch 3."""
    import tensorflow as tf

    from datasets import pipeline
    from tests.gan import synthetic_evaluator

    load_split = registry.load_split
    monkeypatch.setattr(registry, "load_split", lambda name, **options: (
        synthetic_evaluator.dataset(options["split"]) if name == "fashion_mnist"
        else load_split(name, **options)))

    def batches(skip):
        input_fn = pipeline.training_input_fn(
            lambda: registry.training_examples(stacked.NAME, data_dir=None, fashion_mnist_dir=None,
                                               resolution=None, seed=5),
            global_batch_size=8, seed=5, shuffle_buffer=100, skip_global_batches=skip)
        return list(input_fn(tf.distribute.InputContext()).take(4 - skip).as_numpy_iterator())

    full, resumed = batches(0), batches(2)
    for key in ("x", "label"):
        np.testing.assert_array_equal(full[2][key], resumed[0][key])
        np.testing.assert_array_equal(full[3][key], resumed[1][key])
    assert full[0]["x"].shape == (8, 28, 28, 3)
