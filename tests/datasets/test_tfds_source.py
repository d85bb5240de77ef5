import time

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

from datasets import tfds_source
from datasets.errors import DatasetError
from tests.datasets.unlabelled_images import UnlabelledTallImages


@pytest.fixture(scope="module")
def unlabelled_builder(tmp_path_factory) -> tfds.core.DatasetBuilder:
    builder = UnlabelledTallImages(data_dir=str(tmp_path_factory.mktemp("unlabelled")))
    builder.download_and_prepare()
    return builder


def test_preprocess_keeps_a_square_image_exact_at_native_size():
    image = tf.constant(np.arange(16, dtype=np.uint8).reshape(4, 4, 1) * 17)

    x = tfds_source.preprocess_image(image, resolution=4)

    assert x.dtype == tf.float32
    np.testing.assert_allclose(x.numpy(), image.numpy() / 127.5 - 1.0, atol=1e-5)


def test_an_image_stored_at_its_size_skips_the_resize_with_the_same_bits():
    """The shortcut for a static resolution x resolution shape gives what the crop and resize
    give (traced with an unknown shape, so that path runs) on every uint8 value."""
    images = np.random.default_rng(0).integers(0, 256, (64, 28, 28, 1), dtype=np.uint8)
    images[0] = np.arange(28 * 28).reshape(28, 28, 1) % 256

    def traced(shape):
        return tf.function(lambda image: tfds_source.preprocess_image(image, resolution=28),
                           input_signature=[tf.TensorSpec(shape, tf.uint8)])

    shortcut, resized = traced([28, 28, 1]), traced([None, None, 1])
    for image in images:
        np.testing.assert_array_equal(shortcut(image), resized(image))
    op_types = [{op.type for op in function.get_concrete_function().graph.get_operations()}
                for function in (shortcut, resized)]
    assert "ScaleAndTranslate" not in op_types[0] and "ScaleAndTranslate" in op_types[1]


def test_preprocess_center_crops_wide_images_before_resizing():
    image = np.zeros((4, 8, 3), np.uint8)
    image[:, :2] = 255
    image[:, -2:] = 255

    x = tfds_source.preprocess_image(tf.constant(image), resolution=2).numpy()

    assert x.shape == (2, 2, 3)
    np.testing.assert_allclose(x, -1.0, atol=1e-6)


def test_preprocess_resizes_uniform_regions_to_their_value_and_stays_in_range():
    flat = tf.fill([10, 10, 3], tf.constant(51, tf.uint8))
    constant = tfds_source.preprocess_image(flat, resolution=7)
    noise = tf.constant(np.random.default_rng(0).integers(0, 256, (33, 47, 1), dtype=np.uint8))
    resized = tfds_source.preprocess_image(noise, resolution=16)

    np.testing.assert_allclose(constant.numpy(), 51 / 127.5 - 1.0, atol=1e-5)
    assert resized.shape == (16, 16, 1)
    assert -1.0 <= resized.numpy().min() and resized.numpy().max() <= 1.0


def test_preprocess_accepts_float_images_in_unit_range():
    x = tfds_source.preprocess_image(tf.constant([[[0.0], [0.25]], [[0.5], [1.0]]]), resolution=2)

    np.testing.assert_allclose(x.numpy()[..., 0], [[-1.0, -0.5], [0.0, 1.0]], atol=1e-6)


def test_unlabelled_examples_have_label_minus_one_and_the_center_crop(unlabelled_builder):
    dataset = tfds_source.examples(unlabelled_builder, split="train", resolution=None)
    examples = list(dataset.as_numpy_iterator())

    assert dataset.element_spec["x"].shape == (4, 4, 3)
    assert [example["label"] for example in examples] == [-1, -1, -1]
    rows = sorted(set(np.round((examples[0]["x"][:, 0, 0] + 1.0) * 127.5).astype(int).tolist()))
    offset = rows[0] % 10
    assert rows == [10 + offset, 20 + offset, 30 + offset, 40 + offset]


def test_examples_resize_to_the_requested_resolution(unlabelled_builder):
    dataset = tfds_source.examples(unlabelled_builder, split="train", resolution=8)

    assert dataset.element_spec["x"].shape == (8, 8, 3)
    assert next(dataset.as_numpy_iterator())["x"].shape == (8, 8, 3)


@pytest.mark.parametrize(
    "name, resolution, shape, num_classes, first_class",
    [
        ("mnist", None, (28, 28, 1), 10, "0"),
        ("cifar10", 64, (64, 64, 3), 10, "0"),  # names need downloaded metadata
        ("celeb_a", None, (178, 178, 3), None, None),
        ("oxford_flowers102", 48, (48, 48, 3), 102, "pink primrose"),
    ],
)
def test_image_spec_comes_from_metadata_alone(tmp_path, name, resolution, shape, num_classes,
                                              first_class):
    builder = tfds_source.builder(name, data_dir=str(tmp_path))

    spec_shape, class_names = tfds_source.image_spec(builder, resolution=resolution)
    assert spec_shape == shape
    assert (len(class_names) if class_names else None) == num_classes
    assert (class_names[0] if class_names else None) == first_class
    assert not builder.is_prepared()


def test_varying_image_sizes_need_a_resolution(tmp_path):
    builder = tfds_source.builder("oxford_flowers102", data_dir=str(tmp_path))

    with pytest.raises(DatasetError, match="--resolution=N"):
        tfds_source.image_spec(builder, resolution=None)


def test_unknown_tfds_dataset_is_a_dataset_error(tmp_path):
    with pytest.raises(DatasetError, match="tfds:no_such_dataset.*no dataset named 'no_such_"):
        tfds_source.builder("no_such_dataset", data_dir=str(tmp_path))


def test_non_image_dataset_is_a_dataset_error(tmp_path):
    builder = tfds_source.builder("imdb_reviews", data_dir=str(tmp_path))

    with pytest.raises(DatasetError, match="not a single-image dataset"):
        tfds_source.image_spec(builder, resolution=32)


def test_unprepared_dataset_offline_is_a_dataset_error(tmp_path, offline):
    builder = tfds_source.builder("mnist", data_dir=str(tmp_path))

    expected = f"not prepared in --data_dir={tmp_path}.*GANTRY_OFFLINE=1"

    with pytest.raises(DatasetError, match=expected):
        tfds_source.ensure_prepared(builder)


def test_unreachable_mirror_is_detected_fast(tmp_path, monkeypatch, closed_port_url):
    monkeypatch.delenv("GANTRY_OFFLINE", raising=False)
    monkeypatch.setattr(tfds_source, "TFDS_MIRROR_URLS", (closed_port_url,))
    builder = tfds_source.builder("mnist", data_dir=str(tmp_path))
    start = time.monotonic()

    with pytest.raises(DatasetError, match="none of 127.0.0.1:"):
        tfds_source.ensure_prepared(builder)
    assert time.monotonic() - start < 10


def test_prepared_dataset_is_left_alone(unlabelled_builder, offline):
    tfds_source.ensure_prepared(unlabelled_builder)

    assert unlabelled_builder.is_prepared()
