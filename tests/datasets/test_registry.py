import json
import pathlib

import numpy as np
import pytest

from datasets import files, pipeline, registry, toys
from datasets.registry import DatasetError

OLD_RECORDS = pathlib.Path(__file__).resolve().parent.parent / "fixtures" / "old_records"


def test_fashion_mnist_info_is_static_and_follows_resolution():
    native = registry.dataset_info("fashion_mnist")
    resized = registry.dataset_info("fashion_mnist", resolution=32)

    assert (native.kind, native.shape) == ("image", (28, 28, 1))
    assert (native.num_classes, native.num_examples) == (10, 60_000)
    assert native.modes is None and native.mode_std is None
    assert resized.shape == (32, 32, 1)


@pytest.mark.parametrize("name, num_modes, std", [("ring8", 8, 0.01), ("grid25", 25, 0.05)])
def test_toy_info_carries_the_modes(name, num_modes, std):
    info = registry.dataset_info(name)

    assert (info.kind, info.shape) == ("toy", (2,))
    assert (info.num_classes, info.num_examples) == (num_modes, None)
    np.testing.assert_array_equal(info.modes, toys.toy_modes(name)[0])
    assert info.mode_std == std


@pytest.mark.parametrize("name", ["fashion_mnist", "ring8"])
def test_info_round_trips_through_its_json_record(name, tmp_path):
    """Through a file, as a run records it: equal fields, the modes a float32 array again."""
    info = registry.dataset_info(name)
    path = str(tmp_path / "dataset.json")
    files.write_json(path, registry.info_as_record(info))
    back = files.read_json(path, holds="h", fix="f", parse=registry.info_from_record)
    for field in ("name", "kind", "shape", "num_classes", "num_examples", "mode_std",
                  "class_names"):
        assert getattr(back, field) == getattr(info, field), field
    assert isinstance(back.shape, tuple)
    if info.modes is None:
        assert back.modes is None and len(back.class_names) == 10
        assert isinstance(back.class_names, tuple)
    else:
        assert back.modes.dtype == np.float32 and back.modes.shape == (8, 2)
        np.testing.assert_array_equal(back.modes, info.modes)


def test_a_toy_record_of_an_older_version_reads_as_todays_toy():
    """Commit 6f83e9c recorded a toy's kind as "points": read, it is the record ring8 gives now."""
    old = OLD_RECORDS / "ring8_dataset.json"
    assert json.loads(old.read_text())["kind"] == "points"
    back = files.read_json(str(old), holds="h", fix="f", parse=registry.info_from_record)
    assert back.kind == registry.TOY == "toy"
    assert registry.info_as_record(back) == registry.info_as_record(registry.dataset_info("ring8"))


def test_a_record_missing_a_field_is_a_damaged_file(tmp_path):
    record = registry.info_as_record(registry.dataset_info("ring8"))
    del record["shape"]
    path = str(tmp_path / "dataset.json")
    files.write_json(path, record)
    with pytest.raises(files.FileFault, match=rf"{path} is damaged \(.*'shape'\); it holds h\. f"):
        files.read_json(path, holds="h", fix="f", parse=registry.info_from_record)


def test_tfds_info_comes_from_tfds_metadata():
    cifar = registry.dataset_info("tfds:cifar10")
    mnist = registry.dataset_info("tfds:mnist", resolution=64)

    assert (cifar.kind, cifar.shape, cifar.num_classes) == ("image", (32, 32, 3), 10)
    assert (mnist.shape, mnist.num_classes) == ((64, 64, 1), 10)


@pytest.mark.parametrize("name", ["mnist", "tfds:", "ring", "Fashion_MNIST"])
def test_unknown_name_lists_the_known_ones(name):
    with pytest.raises(DatasetError) as raised:
        registry.dataset_info(name)

    message = str(raised.value)
    assert f"--dataset={name!r}" in message
    for known in ("fashion_mnist", "ring8", "grid25", "tfds:<name>"):
        assert known in message


def test_unknown_tfds_name_is_a_dataset_error():
    with pytest.raises(DatasetError, match="--dataset=tfds:no_such_dataset"):
        registry.dataset_info("tfds:no_such_dataset")


def test_varying_size_tfds_dataset_requires_resolution():
    with pytest.raises(DatasetError, match="--resolution=N"):
        registry.dataset_info("tfds:oxford_flowers102")


@pytest.mark.parametrize(
    "name, resolution, message",
    [
        ("fashion_mnist", 0, "--resolution=0 must be a positive integer"),
        ("fashion_mnist", 2.5, "--resolution=2.5 must be a positive integer"),
        ("ring8", 32, "--resolution=32 applies to image datasets only"),
    ],
)
def test_bad_resolution_is_a_dataset_error(name, resolution, message):
    with pytest.raises(DatasetError, match=message):
        registry.dataset_info(name, resolution=resolution)


def test_toy_split_is_the_seeded_toy_stream():
    loaded = registry.load_split(
        "grid25", split="test", data_dir=None, fashion_mnist_dir=None, resolution=None, seed=4
    )
    direct = toys.toy_stream("grid25", split="test", seed=4)

    from_registry = next(loaded.batch(50).as_numpy_iterator())
    from_toys = next(direct.batch(50).as_numpy_iterator())
    np.testing.assert_array_equal(from_registry["x"], from_toys["x"])
    np.testing.assert_array_equal(from_registry["label"], from_toys["label"])


def test_toy_training_examples_are_chunks_of_the_train_stream():
    examples = registry.training_examples(
        "ring8", data_dir=None, fashion_mnist_dir=None, resolution=None, seed=4)
    assert isinstance(examples, pipeline.Chunks)

    chunked = next(examples.dataset.unbatch().batch(50).as_numpy_iterator())
    direct = next(toys.toy_stream("ring8", split="train", seed=4).batch(50).as_numpy_iterator())
    np.testing.assert_array_equal(chunked["x"], direct["x"])
    with pytest.raises(DatasetError, match="--resolution=32 applies to image datasets only"):
        registry.training_examples("ring8", data_dir=None, fashion_mnist_dir=None,
                                   resolution=32, seed=4)


def test_tfds_split_offline_without_data_is_a_dataset_error(tmp_path, offline):
    with pytest.raises(DatasetError, match="--dataset=tfds:mnist is not prepared"):
        registry.load_split(
            "tfds:mnist",
            split="train",
            data_dir=str(tmp_path),
            fashion_mnist_dir=None,
            resolution=None,
            seed=0,
        )
