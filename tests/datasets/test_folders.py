"""`--dataset=folder:PATH`: the scan of file headers and the examples Keras reads from it."""

import logging
import os

import numpy as np
import pytest

from datasets import domains, registry
from gan import evaluator
from tests.image_folders import pattern, write_folder, write_image


def examples(name: str, resolution: int | None = None, **options) -> list[dict]:
    return list(registry.load_split(name, split="train", data_dir=None, fashion_mnist_dir=None,
                                    resolution=resolution, seed=0, **options).as_numpy_iterator())


def test_a_tall_image_is_centre_cropped_to_its_middle_rows(tmp_path):
    rows = np.repeat(np.arange(8, dtype=np.uint8)[:, None] * 10, 4, axis=1)  # 8 high, 4 wide
    write_image(str(tmp_path / "tall.png"), rows)
    (example,) = examples(f"folder:{tmp_path}", resolution=4)
    expected = np.repeat(np.array([20, 30, 40, 50])[:, None], 4, axis=1) / 127.5 - 1
    np.testing.assert_allclose(example["x"][..., 0], expected, atol=1e-6)
    assert example["label"] == -1


def test_downscaling_averages_blocks(tmp_path):
    pixels = np.arange(16, dtype=np.uint8).reshape(4, 4) * 16
    write_image(str(tmp_path / "a.png"), pixels)
    (example,) = examples(f"folder:{tmp_path}", resolution=2)
    blocks = pixels.reshape(2, 2, 2, 2).mean(axis=(1, 3))
    np.testing.assert_allclose(example["x"][..., 0], blocks / 127.5 - 1, atol=1e-5)


def test_channels_default_to_the_files_and_convert_on_request(tmp_path):
    gray, rgb = tmp_path / "gray", tmp_path / "rgb"
    write_folder(str(gray), 2, side=28, channels=1)
    write_image(str(rgb / "a.png"), np.full((28, 28, 3), (200, 100, 50), np.uint8))
    assert registry.dataset_info(f"folder:{gray}").shape == (28, 28, 1)
    assert registry.dataset_info(f"folder:{rgb}").shape == (28, 28, 3)
    assert registry.dataset_info(f"folder:{rgb}", channels=1).shape == (28, 28, 1)
    widened = sorted((e["x"] for e in examples(f"folder:{gray}", channels=3)), key=np.sum)
    for index, image in enumerate(widened):  # pattern 1 is pattern 0 plus 17
        np.testing.assert_allclose(image[..., 1:], np.repeat(image[..., :1], 2, axis=-1))
        np.testing.assert_allclose(image[..., 0], pattern(index, 28, 1) / 127.5 - 1, atol=1e-6)
    luma = examples(f"folder:{rgb}", channels=1)[0]["x"]
    assert luma.shape == (28, 28, 1)
    # ITU-R 601 luma of (200, 100, 50): 124.2, within one level.
    np.testing.assert_allclose(luma, 124.2 / 127.5 - 1, atol=1.0 / 127.5)


def test_a_gif_converts_to_grayscale(tmp_path):
    write_image(str(tmp_path / "a.gif"), np.full((28, 28, 3), 90, np.uint8))
    write_image(str(tmp_path / "b.png"), np.full((28, 28), 90, np.uint8))
    assert registry.dataset_info(f"folder:{tmp_path}").shape == (28, 28, 3)  # GIFs are RGB
    got = examples(f"folder:{tmp_path}", channels=1)
    assert len(got) == 2
    for example in got:
        np.testing.assert_allclose(example["x"], 90 / 127.5 - 1, atol=1.0 / 127.5)


def test_class_subfolders_are_the_classes_searched_recursively(tmp_path):
    write_folder(str(tmp_path), {"dogs": 3, "cats": 2})
    write_image(str(tmp_path / "cats" / "deep" / "er" / "x.jpg"), pattern(9, 40, 3))
    (tmp_path / "dogs" / "notes.txt").write_text("not an image")
    write_folder(str(tmp_path / ".hidden"), 1)
    info = registry.dataset_info(f"folder:{tmp_path}", resolution=32)
    assert (info.class_names, info.num_classes, info.num_examples) == (("cats", "dogs"), 2, 6)
    labels = [int(e["label"]) for e in examples(f"folder:{tmp_path}", resolution=32)]
    assert sorted(labels) == [0, 0, 0, 1, 1, 1]


def test_one_subfolder_or_nested_folders_without_loose_images_have_no_classes(tmp_path):
    write_folder(str(tmp_path / "only" / "a" / "b"), 3)
    info = registry.dataset_info(f"folder:{tmp_path}")
    assert (info.shape, info.num_classes, info.num_examples) == ((32, 32, 3), None, 3)


def test_undecodable_files_are_skipped_and_counted(tmp_path, caplog):
    write_folder(str(tmp_path), 3)
    (tmp_path / "broken.png").write_bytes(b"\x89PNG not really")
    (tmp_path / "text.jpg").write_text("hello")
    info = registry.dataset_info(f"folder:{tmp_path}")
    assert info.num_examples == 3
    with caplog.at_level(logging.WARNING):
        assert len(examples(f"folder:{tmp_path}")) == 3
    assert "skipped 2 of 5 image files" in caplog.text and "broken.png" in caplog.text


def test_a_truncated_png_is_skipped(tmp_path):
    write_folder(str(tmp_path), 2)
    whole = (tmp_path / "000.png").read_bytes()
    (tmp_path / "000.png").write_bytes(whole[: len(whole) // 2])
    assert registry.dataset_info(f"folder:{tmp_path}").num_examples == 1
    assert len(examples(f"folder:{tmp_path}")) == 1


@pytest.mark.parametrize("make, message", [
    (lambda root: None, "does not exist; give a folder of images"),
    (lambda root: root.write_text("x"), "is a file, not a folder"),
    (lambda root: root.mkdir(), "is empty"),
    (lambda root: (root.mkdir(), (root / "a.txt").write_text("x")), "no image files"),
    (lambda root: (root.mkdir(), (root / "a.png").write_text("x")),
     "none of the 1 image files under"),
    (lambda root: (write_folder(str(root / "a"), 1, side=28), write_folder(str(root / "a/b"), 1)),
     "not all of one square size (2 sizes: 28x28, 32x32); pass --resolution=N"),
    (lambda root: write_image(str(root / "a.png"), np.zeros((30, 40), np.uint8)),
     "not all of one square size (1 sizes: 40x30)"),
    (lambda root: (write_folder(str(root), {"a": 1, "b": 1}), write_folder(str(root), 1)),
     "holds class sub-folders (a, b) and 1 image files of its own (000.png)"),
])
def test_bad_folders_are_refused_naming_the_path(tmp_path, make, message):
    root = tmp_path / "images"
    make(root)
    with pytest.raises(registry.DatasetError) as error:
        registry.dataset_info(f"folder:{root}")
    assert message in str(error.value) and str(root) in str(error.value)


def test_channels_must_be_1_or_3_and_only_for_folders(tmp_path):
    write_folder(str(tmp_path), 1)
    with pytest.raises(registry.DatasetError,
                       match=r"--channels=2 is invalid: use 1 \(grayscale\) or 3"):
        registry.dataset_info(f"folder:{tmp_path}", channels=2)
    with pytest.raises(registry.DatasetError, match="--channels=3 converts the images of a folder"):
        registry.dataset_info("fashion_mnist", channels=3)
    with pytest.raises(registry.DatasetError, match="names no folder"):
        registry.dataset_info("folder:")


def test_the_evaluator_cache_is_distinct_per_folder_and_safe_as_a_name(tmp_path):
    keys = {evaluator.evaluator_dir(name, resolution=32, cache_dir="/c", channels=channels)
            for name, channels in [("folder:/a/b_c", None), ("folder:/a/b/c", None),
                                   ("folder:/a/b/c/", 1), ("folder:/a/b/c", 1)]}
    assert len(keys) == 3  # a trailing slash names the same folder
    assert all(os.path.dirname(key) == "/c" and os.path.basename(key).startswith("folder_")
               for key in keys)
    assert evaluator.evaluator_dir("tfds:cifar10", resolution=32,
                                   cache_dir="/c") == "/c/tfds_cifar10-32"


def test_a_folder_is_a_whole_domain(tmp_path):
    write_folder(str(tmp_path / "a:b"), 2, side=28, channels=1)
    domain = domains.parse_domain(f"folder:{tmp_path}/a:b", flag="domain_a", resolution=None,
                                  channels=3)
    assert domain.dataset == f"folder:{tmp_path}/a:b"
    assert (domain.classes, domain.shape) == ((), (28, 28, 3))
    loaded = domains.load_domain(domain, split="test", data_dir=None, fashion_mnist_dir=None,
                                 resolution=None, seed=0, channels=3)
    assert [e["x"].shape for e in loaded.as_numpy_iterator()] == [(28, 28, 3)] * 2


def test_channels_convert_a_folder_domain_to_match_a_dataset_domain(tmp_path):
    write_folder(str(tmp_path), 1, side=28, channels=3)
    pair = [domains.parse_domain(spec, flag=flag, resolution=None, channels=1) for spec, flag in
            [(f"folder:{tmp_path}", "domain_a"), ("fashion_mnist:Sneaker", "domain_b")]]
    assert domains.pair_info(*pair).shape == (28, 28, 1)
