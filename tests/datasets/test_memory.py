"""In-memory data (`datasets.memory`): what arrays and datasets are accepted, their fingerprint,
the examples and DatasetInfo they give by name, and the messages of a resume with other data."""

import numpy as np
import pytest
import tensorflow as tf

from datasets import memory, registry
from datasets.errors import DatasetError

RNG = np.random.default_rng(0)
IMAGES = RNG.integers(0, 256, size=(12, 8, 8, 1), dtype=np.uint8)
LABELS = np.arange(12) % 3


def test_uint8_and_the_same_float_images_are_the_same_data():
    as_uint8 = memory.from_arrays(IMAGES, LABELS)
    as_float = memory.from_arrays(IMAGES.astype(np.float64) / 127.5 - 1, LABELS)
    grayscale = memory.from_arrays(IMAGES[..., 0], LABELS)  # [N, H, W]
    assert as_uint8.fingerprint == as_float.fingerprint == grayscale.fingerprint
    assert as_uint8.images.dtype == np.float32 and as_uint8.images.shape == (12, 8, 8, 1)
    assert (as_uint8.images.min(), as_uint8.images.max()) == (
        IMAGES.min() / 127.5 - 1, IMAGES.max() / 127.5 - 1)
    assert as_uint8.name == f"memory:{as_uint8.fingerprint}" and len(as_uint8.fingerprint) == 16
    assert as_uint8.num_classes == 3 and as_uint8.describe() == "12 images 8x8x1, 3 classes"


def test_other_labels_order_or_class_names_are_other_data():
    base = memory.from_arrays(IMAGES, LABELS).fingerprint
    assert memory.from_arrays(IMAGES, (LABELS + 1) % 3).fingerprint != base
    assert memory.from_arrays(IMAGES[::-1], LABELS).fingerprint != base
    assert memory.from_arrays(IMAGES, LABELS, ["a", "b", "c"]).fingerprint != base
    assert memory.from_arrays(IMAGES).fingerprint != base


@pytest.mark.parametrize("images, labels, class_names, message", [
    (IMAGES[..., 0:1].repeat(2, -1), None, None, r"data: images must be \[N, H, W, C\] with C 1 or 3"),
    (IMAGES.astype(np.int32), None, None, "data: images must be uint8 in \\[0, 255\\] or float"),
    (IMAGES.astype(np.float32), None, None, "data: float images must be finite and in \\[-1, 1\\]; "
                                            "these range from 0 to 255"),
    (IMAGES, LABELS[:5], None, "labels: must be integers \\[N\\] with N = 12"),
    (IMAGES, LABELS, ["a", "b"], "labels: must be class indices 0..1 \\(2 class_names\\); found 0..2"),
    (IMAGES, LABELS - 1, None, "labels: must be class indices 0..1; found -1..1"),
    (IMAGES, None, ["a"], "class_names without labels"),
])
def test_data_that_does_not_fit_is_refused_naming_the_argument(images, labels, class_names, message):
    with pytest.raises(ValueError, match=message):
        memory.from_arrays(images, labels, class_names)


@pytest.mark.parametrize("make", [
    lambda: tf.data.Dataset.from_tensor_slices((IMAGES, LABELS)),
    lambda: tf.data.Dataset.from_tensor_slices({"image": IMAGES, "label": LABELS}).batch(5),
    lambda: tf.data.Dataset.from_tensor_slices({"x": IMAGES, "label": LABELS}),
], ids=["pairs", "batched dicts", "x dicts"])
def test_a_dataset_is_read_whole_into_the_same_data(make):
    assert memory.from_dataset(make()).fingerprint == memory.from_arrays(IMAGES, LABELS).fingerprint


def test_a_dataset_of_images_alone_has_no_labels():
    data = memory.from_dataset(tf.data.Dataset.from_tensor_slices(IMAGES))
    assert data.num_classes is None and set(data.labels) == {-1}
    assert data.fingerprint == memory.from_arrays(IMAGES).fingerprint


def test_an_endless_or_too_large_dataset_is_refused():
    endless = tf.data.Dataset.from_tensor_slices(IMAGES).repeat()
    with pytest.raises(ValueError, match="data: a tf.data.Dataset is read into memory once, so it "
                                         "must be finite"):
        memory.from_dataset(endless)
    with pytest.raises(ValueError, match="at most"):
        memory.from_dataset(tf.data.Dataset.from_tensor_slices(IMAGES), limit_bytes=100)


def test_supplied_data_is_a_dataset_by_name_only_while_supplied():
    data = memory.from_arrays(IMAGES, LABELS, ["a", "b", "c"])
    with memory.supplied(data):
        info = registry.dataset_info(data.name)
        examples = list(registry.load_split(data.name, split="test").take(2))
    assert (info.kind, info.shape, info.num_classes, info.num_examples) == ("image", (8, 8, 1), 3, 12)
    assert info.class_names == ("a", "b", "c")
    np.testing.assert_array_equal(examples[1]["x"], data.images[1])
    assert int(examples[1]["label"]) == 1
    with pytest.raises(DatasetError, match=f"--dataset={data.name} is in-memory data \\(fingerprint "
                                           f"{data.fingerprint}\\) given to api.train; it exists only"):
        registry.dataset_info(data.name)


def test_a_resume_with_other_data_says_what_the_run_needs():
    memory.check_resume("memory:aaaa", "memory:aaaa", "runs/x")
    memory.check_resume("fashion_mnist", "ring8", "runs/x")  # not in-memory: the flag check's
    with pytest.raises(DatasetError, match="The run in runs/x was trained on in-memory data of "
                                           "fingerprint aaaa \\(passed to api.train\\); the data "
                                           "given now has fingerprint bbbb. Resume with the same"):
        memory.check_resume("memory:aaaa", "memory:bbbb", "runs/x")
    with pytest.raises(DatasetError, match="and --dataset=fashion_mnist was given instead. Resume "
                                           "it from Python with the same arrays"):
        memory.check_resume("memory:aaaa", "fashion_mnist", "runs/x")
