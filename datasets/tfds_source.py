"""Any TFDS image dataset as Gantry examples: {"x": float32 HWC in [-1, 1], "label": int64}.

Serves `--dataset=tfds:<name>` (and Fashion-MNIST once `datasets.fashion_mnist` has a prepared
builder). The image is the first element of the dataset's supervised keys, or its only Image
feature; the label is the supervised label when it is a ClassLabel and -1 otherwise, so every
dataset yields the same example structure.

Images are center-cropped to a square and resized with antialiasing: a GAN needs one fixed square
shape, and cropping (rather than squashing) keeps object proportions. Without a resolution the
native size is kept, which needs a known image size.

Preparing a missing dataset downloads it only when `datasets.network.download_allowed` says a
download can succeed, because TFDS without a network retries for minutes.
"""

import tensorflow as tf
import tensorflow_datasets as tfds
from absl import logging

from datasets import network, preparation
from datasets.errors import DatasetError

# TFDS tries its own mirror first; a reachable mirror is the cheapest sign a download can work.
TFDS_MIRROR_URLS = ("https://storage.googleapis.com/tfds-data/",)


def builder(name: str, *, data_dir: str | None) -> tfds.core.DatasetBuilder:
    """The TFDS builder for `name` ("mnist", "cifar10", "celeb_a:2.1.0", ...); no data is read."""
    try:
        return tfds.builder(name, data_dir=data_dir)
    except tfds.core.DatasetNotFoundError as error:
        raise DatasetError(
            f"--dataset=tfds:{name}: TFDS has no dataset named {name!r}. Use a name from "
            "https://www.tensorflow.org/datasets/catalog/overview, e.g. tfds:mnist or tfds:cifar10."
        ) from error
    except ValueError as error:
        first_line = str(error).splitlines()[0]
        raise DatasetError(f"--dataset=tfds:{name}: {first_line}") from error


def image_spec(
    dataset_builder: tfds.core.DatasetBuilder, *, resolution: int | None
) -> tuple[tuple[int, int, int], tuple[str, ...] | None]:
    """Returns (shape of "x" after preprocessing, class names or None) from the builder's
    info alone, so flags can be validated without touching data."""
    image_key, label_key = _feature_keys(dataset_builder)
    features = dataset_builder.info.features
    height, width, channels = features[image_key].shape
    if resolution is None:
        if height is None or width is None:
            raise DatasetError(
                f"--dataset=tfds:{dataset_builder.name} has images of varying size "
                f"{features[image_key].shape}: pass --resolution=N to crop and resize them to NxN."
            )
        side = min(height, width)
        shape = (side, side, channels)
    else:
        shape = (resolution, resolution, channels)
    class_names = tuple(features[label_key].names) if label_key else None
    return shape, class_names


def ensure_prepared(dataset_builder: tfds.core.DatasetBuilder) -> None:
    """Downloads and prepares the dataset unless it is already in the builder's data_dir."""
    if dataset_builder.is_prepared():
        return
    allowed, reason = network.download_allowed(TFDS_MIRROR_URLS)
    where = dataset_builder.data_dir_root
    if not allowed:
        raise DatasetError(
            f"--dataset=tfds:{dataset_builder.name} is not prepared in --data_dir={where} and the "
            f"download was {reason}. Prepare it on a machine with internet access "
            f"(tfds build {dataset_builder.name} --data_dir=DIR) and pass --data_dir=DIR."
        )
    with preparation.exclusive(where, dataset_builder.name):
        if dataset_builder.is_prepared():  # by another process, while this one waited
            dataset_builder.info.read_from_directory(dataset_builder.data_dir)
            return
        logging.info("Downloading TFDS dataset %s into %s (%s).", dataset_builder.name, where, reason)
        try:
            dataset_builder.download_and_prepare()
        except Exception as error:  # TFDS raises many unrelated types for one cause: no data.
            raise DatasetError(
                f"--dataset=tfds:{dataset_builder.name}: the TFDS download into --data_dir={where} "
                f"failed ({type(error).__name__}: {error}). Prepare the data with internet access "
                f"(tfds build {dataset_builder.name} --data_dir=DIR) and pass --data_dir=DIR."
            ) from error


def examples(
    dataset_builder: tfds.core.DatasetBuilder, *, split: str, resolution: int | None
) -> tf.data.Dataset:
    """Unshuffled, finite examples of a prepared builder's `split`, preprocessed."""
    image_key, label_key = _feature_keys(dataset_builder)
    shape, _ = image_spec(dataset_builder, resolution=resolution)

    def to_example(record: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        x = preprocess_image(record[image_key], resolution=shape[0])
        x.set_shape(shape)
        label = tf.cast(record[label_key], tf.int64) if label_key else tf.constant(-1, tf.int64)
        return {"x": x, "label": label}

    records = dataset_builder.as_dataset(split=split, shuffle_files=False)
    return records.map(to_example, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)


def preprocess_image(image: tf.Tensor, *, resolution: int) -> tf.Tensor:
    """HWC image of any size and integer/float dtype -> float32 resolution x resolution in [-1, 1].

    Center-crops to the largest square, resizes (bilinear, antialiased, so downscaling does not
    alias), then maps [0, 1] to [-1, 1]. The clip only absorbs float rounding of the resize.
    An image whose static shape is already resolution x resolution skips the crop and resize:
    resizing to the same size is the identity bit for bit, and it was most of the time of
    reading a dataset stored at its training size (Fashion-MNIST: 60,000 examples per run).
    """
    image = tf.image.convert_image_dtype(image, tf.float32)
    if tuple(image.shape[:2]) != (resolution, resolution):
        shape = tf.shape(image)
        side = tf.minimum(shape[0], shape[1])
        image = tf.image.resize_with_crop_or_pad(image, side, side)
        image = tf.image.resize(image, (resolution, resolution), antialias=True)
    return tf.clip_by_value(image * 2.0 - 1.0, -1.0, 1.0)


def _feature_keys(dataset_builder: tfds.core.DatasetBuilder) -> tuple[str, str | None]:
    """(image feature key, ClassLabel feature key or None)."""
    info = dataset_builder.info
    features = info.features
    keys = info.supervised_keys
    if isinstance(keys, tuple) and len(keys) == 2 and all(isinstance(key, str) for key in keys):
        image_key, label_key = keys
        if isinstance(features[image_key], tfds.features.Image):
            is_class = isinstance(features[label_key], tfds.features.ClassLabel)
            return image_key, label_key if is_class else None
    image_keys = [
        key for key, feature in features.items() if isinstance(feature, tfds.features.Image)
    ]
    if len(image_keys) != 1:
        raise DatasetError(
            f"--dataset=tfds:{dataset_builder.name} is not a single-image dataset "
            f"(image features: {image_keys or 'none'}): choose one such as tfds:cifar10."
        )
    return image_keys[0], None
