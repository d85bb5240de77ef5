"""`--dataset=folder:PATH`: a folder of image files as Gantry examples {"x", "label"}.

What is read: every PNG, JPEG, BMP and GIF file under PATH, searched recursively (the formats
and the walk of `keras.utils.image_dataset_from_directory`, which reads them). When PATH holds
two or more sub-folders with images and no image of its own, the sub-folder names (sorted) are
the classes and "label" is the index of a file's sub-folder; otherwise every example has label
-1. Loose images next to class sub-folders are refused: which class they belong to is unknown.

What the files are is answered from their headers alone (Pillow reads size and colour mode
without decoding pixels; PNG chunk checksums are verified), so `registry.dataset_info` checks
flags without decoding an image. A file whose header does not read is skipped, counted and
named in the log: a folder gathered from many places often holds a few broken files, and one
should not stop a run. The reader drops any file that still fails to decode in the same way
(`ignore_errors`, logged by TensorFlow).

Images are centre-cropped to a square and resized (Keras's `crop_to_aspect_ratio`): "area"
averaging when every file is at least the target size (it does not alias), else bilinear.
Channels: `channels` 1 or 3 converts; None keeps what the files are (1 when every file is
grayscale, else 3; an alpha channel is dropped). Without a resolution the files' common size
is kept, which needs one square size for all.

A folder has no test split: "train" and "test" are both every image (StudioGAN's choice for
data without a split), so evaluation scores against the training images. Their order is fixed
and mixed (`ORDER_SEED`), so the first N images, the reference of an evaluation, cover every
class.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
import re

import tensorflow as tf
from absl import logging

from datasets.errors import DatasetError

PREFIX = "folder:"
# keras.utils.image_dataset_from_directory's allow-list (it matches the lower-cased name).
FORMATS = (".bmp", ".gif", ".jpeg", ".jpg", ".png")
# Pillow's names of the formats TensorFlow decodes (MPO: multi-picture JPEG from cameras).
_DECODED_FORMATS = ("PNG", "JPEG", "MPO", "BMP", "GIF")
_GRAY_MODES = ("1", "L", "LA", "La", "I", "I;16", "I;16B", "I;16L", "F")
SPLITS = ("train", "test")
# Keras shuffles the file list with this seed: the examples come in one fixed mixed order, so
# the first N (an evaluation's reference) are a sample of every class, not the first classes.
ORDER_SEED = 0
_NAMED = 5  # file names quoted in a message


@dataclasses.dataclass(frozen=True)
class Header:
    """What a file's header says: its (height, width), whether it is grayscale, and whether it
    is a GIF (which TensorFlow decodes to RGB only)."""

    height: int
    width: int
    gray: bool
    gif: bool = False


@dataclasses.dataclass(frozen=True)
class Scan:
    """The readable image files of a folder, in the order Keras reads them.

    `files` are paths relative to `root`; `headers` are theirs; `labels` their class indices
    (-1 without classes); `skipped` the image files whose header does not read."""

    root: str
    files: tuple[str, ...]
    headers: tuple[Header, ...]
    labels: tuple[int, ...]
    class_names: tuple[str, ...] | None
    skipped: tuple[str, ...]


def is_folder(name: str) -> bool:
    """Whether a --dataset value names a folder ("folder:PATH")."""
    return name.startswith(PREFIX)


def folder_path(name: str) -> str:
    """PATH of "folder:PATH"; DatasetError when it is empty."""
    path = name[len(PREFIX):]
    if not path:
        raise DatasetError(f"--dataset={name!r} names no folder: write folder:PATH, e.g. "
                           "folder:/data/faces.")
    return path


def cache_key(name: str, channels: int | None) -> str:
    """A file-name-safe key, distinct for distinct folders (and channel choices): the folder's
    base name and a hash of its absolute path, for caches keyed by dataset."""
    path = folder_path(name)
    absolute = path if "://" in path else os.path.abspath(path)
    digest = hashlib.sha256(f"{absolute}\0{channels}".encode()).hexdigest()[:12]
    base = re.sub(r"[^A-Za-z0-9_.]+", "_", os.path.basename(absolute.rstrip("/"))) or "root"
    return f"folder_{base}_{digest}"


def scan(name: str) -> Scan:
    """The folder's readable images, classes and skipped files; DatasetError for a folder that
    is missing, empty, holds no readable image, or mixes class sub-folders with loose images."""
    root = folder_path(name)
    if not tf.io.gfile.isdir(root):
        what = "is a file, not a folder" if tf.io.gfile.exists(root) else "does not exist"
        raise DatasetError(f"--dataset={name!r}: {root} {what}; give a folder of images.")
    entries = sorted(tf.io.gfile.listdir(root))
    if not entries:
        raise DatasetError(f"--dataset={name!r}: the folder {root} is empty; put PNG, JPEG, BMP "
                           "or GIF images in it (or in one sub-folder per class).")
    loose = [entry for entry in entries if _is_image(entry)
             and not tf.io.gfile.isdir(os.path.join(root, entry))]
    subfolders = [entry.rstrip("/") for entry in entries if not entry.startswith(".")
                  and tf.io.gfile.isdir(os.path.join(root, entry))]
    classes = {sub: _image_files(root, sub) for sub in subfolders}
    classes = {sub: found for sub, found in classes.items() if found}
    if loose and classes:
        raise DatasetError(
            f"--dataset={name!r}: {root} holds class sub-folders ({_quote(list(classes))}) and "
            f"{len(loose)} image files of its own ({_quote(loose)}), which belong to no class; "
            "move them into a class sub-folder, or move every image out of the sub-folders.")
    if len(classes) >= 2:
        class_names = tuple(classes)
        paths = [(path, label) for label, found in enumerate(classes.values()) for path in found]
    else:
        class_names = None
        paths = [(path, -1) for path in _image_files(root, "")]
    if not paths:
        raise DatasetError(f"--dataset={name!r}: no image files ({', '.join(FORMATS)}) under "
                           f"{root}, searched recursively; put images there.")
    files, headers, labels, skipped = [], [], [], []
    for path, label in paths:
        header = _header(os.path.join(root, path))
        if header is None:
            skipped.append(path)
            continue
        files.append(path)
        headers.append(header)
        labels.append(label)
    if not files:
        raise DatasetError(f"--dataset={name!r}: none of the {len(skipped)} image files under "
                           f"{root} decodes ({_quote(skipped)}); give PNG, JPEG, BMP or GIF "
                           "images.")
    if class_names:
        present = set(labels)
        empty = [class_name for index, class_name in enumerate(class_names)
                 if index not in present]
        if empty:
            raise DatasetError(f"--dataset={name!r}: the class sub-folders {_quote(empty)} of "
                               f"{root} hold no readable image; add images or remove them.")
    return Scan(root=root, files=tuple(files), headers=tuple(headers), labels=tuple(labels),
                class_names=class_names, skipped=tuple(skipped))


def image_shape(name: str, found: Scan, *, resolution: int | None,
                channels: int | None) -> tuple[int, int, int]:
    """The (H, W, C) of the examples: --resolution (or the files' common square size) and
    --channels (or the files' own)."""
    if channels is None:
        channels = 1 if all(header.gray for header in found.headers) else 3
    if resolution is not None:
        return resolution, resolution, channels
    sizes = sorted({(header.height, header.width) for header in found.headers})
    if len(sizes) > 1 or sizes[0][0] != sizes[0][1]:
        shown = ", ".join(f"{width}x{height}" for height, width in sizes[:_NAMED])
        more = f" and {len(sizes) - _NAMED} more" if len(sizes) > _NAMED else ""
        raise DatasetError(
            f"--dataset={name!r}: the images under {found.root} are not all of one square size "
            f"({len(sizes)} sizes: {shown}{more}); pass --resolution=N to centre-crop and resize "
            "them to NxN.")
    return sizes[0][0], sizes[0][0], channels


def examples(name: str, *, split: str, resolution: int | None,
             channels: int | None) -> tf.data.Dataset:
    """Finite examples {"x": float32 HWC in [-1, 1], "label": int64} of the folder (the same
    for both splits, see the module docstring), in a fixed order: Keras's shuffle of the file
    names with ORDER_SEED (the paths are shuffled before decoding; the first pass over a new
    dataset is always the same order, and the input pipeline reads the data once, held in
    memory or cached)."""
    import keras
    if split not in SPLITS:
        raise DatasetError(f"--dataset={name!r}: a folder has no split {split!r} (only "
                           f"{' and '.join(SPLITS)}, which are both every image).")
    found = scan(name)
    shape = image_shape(name, found, resolution=resolution, channels=channels)
    if found.skipped:
        logging.warning("--dataset=%s: skipped %d of %d image files whose header does not "
                        "decode: %s", name, len(found.skipped),
                        len(found.skipped) + len(found.files), _quote(found.skipped))
    downscale = all(min(header.height, header.width) >= shape[0] for header in found.headers)
    # GIFs decode to RGB only: then read RGB and convert (ITU-R 601 luma, as libpng and libjpeg).
    gray_from_rgb = shape[2] == 1 and any(header.gif for header in found.headers)
    images = keras.utils.image_dataset_from_directory(
        found.root, labels="inferred" if found.class_names else None,
        label_mode="int" if found.class_names else None,
        class_names=list(found.class_names) if found.class_names else None,
        color_mode="grayscale" if shape[2] == 1 and not gray_from_rgb else "rgb", batch_size=None,
        image_size=shape[:2], shuffle=True, seed=ORDER_SEED, crop_to_aspect_ratio=True,
        interpolation="area" if downscale else "bilinear", verbose=False)

    def to_example(image, label=None):
        if gray_from_rgb:
            image = tf.image.rgb_to_grayscale(image)
        label = tf.constant(-1, tf.int64) if label is None else tf.cast(label, tf.int64)
        return {"x": tf.clip_by_value(image / 127.5 - 1.0, -1.0, 1.0), "label": label}

    return images.map(to_example, num_parallel_calls=tf.data.AUTOTUNE,
                      deterministic=True).ignore_errors(log_warning=True)


def _is_image(file_name: str) -> bool:
    return file_name.lower().endswith(FORMATS)


def _image_files(root: str, sub: str) -> list[str]:
    """The image files under root/sub, recursively, relative to root, in Keras's order
    (directories sorted by path, files by name)."""
    top = os.path.join(root, sub) if sub else root
    return [os.path.relpath(os.path.join(directory, file_name), root)
            for directory, _, file_names in sorted(tf.io.gfile.walk(top), key=lambda w: w[0])
            for file_name in sorted(file_names) if _is_image(file_name)]


def _header(path: str) -> Header | None:
    """The file's Header, or None when it is not an image TensorFlow decodes. Cached by
    (path, modification time, size): a folder is scanned by every mode and check."""
    stat = tf.io.gfile.stat(path)
    return _read_header(path, stat.mtime_nsec, stat.length)


@functools.lru_cache(maxsize=None)
def _read_header(path: str, mtime_nsec: int, length: int) -> Header | None:
    del mtime_nsec, length  # the cache key only
    from PIL import Image
    try:
        with tf.io.gfile.GFile(path, "rb") as file, Image.open(file) as image:
            if image.format not in _DECODED_FORMATS:
                return None
            header = Header(height=image.height, width=image.width,
                            gray=image.mode in _GRAY_MODES, gif=image.format == "GIF")
            image.verify()  # PNG: every chunk's checksum, so a truncated file is caught here
            return header
    except Exception:  # Pillow raises many types (OSError, SyntaxError, ...) for one cause.
        return None


def _quote(names) -> str:
    names = list(names)
    shown = ", ".join(names[:_NAMED])
    return shown + (f" and {len(names) - _NAMED} more" if len(names) > _NAMED else "")
