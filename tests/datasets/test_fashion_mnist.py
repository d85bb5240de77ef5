import gzip
import logging
import os
import time

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

from datasets import fashion_mnist, registry, tfds_source
from datasets.errors import DatasetError

THREE_WAYS = (
    "sudo apt-get install dataset-fashion-mnist",
    "--fashion_mnist_dir=FOLDER",
    "internet access",
)


def _load(data_dir: str, *, split: str, resolution: int | None):
    return registry.load_split(
        "fashion_mnist",
        split=split,
        data_dir=data_dir,
        fashion_mnist_dir=None,
        resolution=resolution,
        seed=0,
    )


def test_prepared_under_tfds_own_name_with_both_splits(fashion_mnist_data_dir):
    builder = tfds.builder("fashion_mnist", data_dir=fashion_mnist_data_dir)

    assert builder.is_prepared()
    assert builder.info.splits["train"].num_examples == 60_000
    assert builder.info.splits["test"].num_examples == 10_000
    assert os.path.isdir(os.path.join(fashion_mnist_data_dir, "fashion_mnist", "3.0.1"))
    assert not os.path.exists(os.path.join(fashion_mnist_data_dir, "downloads"))


def test_examples_are_28x28x1_in_range_with_all_ten_labels(fashion_mnist_data_dir):
    dataset = _load(fashion_mnist_data_dir, split="test", resolution=None)
    batch = next(dataset.batch(1000).as_numpy_iterator())

    assert dataset.element_spec["x"].shape == (28, 28, 1)
    assert batch["x"].dtype == np.float32 and batch["x"].shape == (1000, 28, 28, 1)
    assert batch["x"].min() == -1.0 and batch["x"].max() == 1.0
    pixel_levels = (batch["x"] + 1.0) * 127.5
    np.testing.assert_allclose(pixel_levels, np.round(pixel_levels), atol=1e-3)
    assert batch["label"].dtype == np.int64
    assert sorted(set(batch["label"].tolist())) == list(range(10))
    assert dataset.cardinality() == 10_000


def test_second_load_uses_prepared_data_without_files_or_network(
    fashion_mnist_data_dir, tmp_path, offline, caplog
):
    caplog.set_level(logging.INFO, logger="absl")

    builder = fashion_mnist.prepared_builder(
        data_dir=fashion_mnist_data_dir, fashion_mnist_dir=str(tmp_path)
    )

    assert builder.info.splits["train"].num_examples == 60_000
    assert "using the prepared TFDS data" in caplog.text
    assert "preparing TFDS data" not in caplog.text


def test_resolution_32_resizes(fashion_mnist_data_dir):
    dataset = _load(fashion_mnist_data_dir, split="test", resolution=32)
    x = next(dataset.batch(64).as_numpy_iterator())["x"]

    assert dataset.element_spec["x"].shape == (32, 32, 1)
    assert x.shape == (64, 32, 32, 1)
    # the same images at 28 px, back to uint8, then the TFDS sources' crop-and-resize
    native = next(_load(fashion_mnist_data_dir, split="test", resolution=None).batch(64)
                  .as_numpy_iterator())["x"]
    pixels = tf.constant(np.round((native + 1.0) * 127.5).astype(np.uint8))
    expected = [tfds_source.preprocess_image(image, resolution=32).numpy() for image in pixels]
    np.testing.assert_allclose(x, expected, atol=1e-6)


def test_no_data_no_files_offline_lists_the_three_ways_fast(tmp_path, offline):
    empty_files, empty_data = tmp_path / "files", tmp_path / "data"
    empty_files.mkdir()
    empty_data.mkdir()
    start = time.monotonic()

    with pytest.raises(DatasetError) as raised:
        fashion_mnist.prepared_builder(data_dir=str(empty_data), fashion_mnist_dir=str(empty_files))

    assert time.monotonic() - start < 10
    message = str(raised.value)
    for way in THREE_WAYS:
        assert way in message
    assert f"--fashion_mnist_dir={empty_files}: missing train-images-idx3-ubyte.gz" in message
    assert "GANTRY_OFFLINE=1" in message


def test_unreachable_download_hosts_are_detected_fast(tmp_path, monkeypatch, closed_port_url):
    monkeypatch.delenv("GANTRY_OFFLINE", raising=False)
    monkeypatch.setattr(fashion_mnist, "DOWNLOAD_URLS", (closed_port_url,))
    start = time.monotonic()

    with pytest.raises(DatasetError) as raised:
        fashion_mnist.prepared_builder(data_dir=str(tmp_path), fashion_mnist_dir=str(tmp_path))

    assert time.monotonic() - start < 10
    assert "3. TFDS download: skipped because none of 127.0.0.1:" in str(raised.value)


@pytest.mark.parametrize(
    "content", [b"not gzip", gzip.compress(bytes(100))], ids=["not_gzip", "truncated"]
)
def test_corrupt_idx_files_are_reported_not_raised_raw(tmp_path, offline, content):
    files, data = tmp_path / "files", tmp_path / "data"
    files.mkdir()
    for name in fashion_mnist.IDX_FILES.values():
        (files / name).write_bytes(content)

    with pytest.raises(DatasetError) as raised:
        fashion_mnist.prepared_builder(data_dir=str(data), fashion_mnist_dir=str(files))

    assert f"--fashion_mnist_dir={files}: unreadable" in str(raised.value)
