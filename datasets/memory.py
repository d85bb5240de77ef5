"""In-memory images as a dataset: the arrays (or the `tf.data.Dataset`) given to `api.train`.

What is accepted (`from_arrays`): images uint8 [N, H, W, C] in [0, 255], or float [N, H, W, C]
in [-1, 1] (the range the networks produce with tanh); [N, H, W] is grayscale, C = 1. C is 1 or
3. Labels, optional, are integers [N] >= 0; the class count is `len(class_names)` when names are
given, else the largest label + 1. Without labels every example has label -1, as a folder
without class sub-folders has.

A dataset is named "memory:<fingerprint>", a hash of the images as trained on (float32 in
[-1, 1]), the labels and the class names: LOGDIR/config.json records that name, so a resume
with other arrays is refused (`check_resume`) instead of silently training on other data, and
the fingerprint says which data a run needs. The arrays exist only in the process that passed
them: `supplied` makes them readable by name (`lookup`) while a run uses them, as
`setups.user_networks.supplied` does for networks.

A `tf.data.Dataset` (`from_dataset`) is read into memory once, not streamed: the fingerprint
needs its content, its size must be known before training (the batch size is checked against
it), and an exact resume needs the same examples in the same order again, which a dataset
that reshuffles or reads changing files would not give. It may hold images, (image, label)
pairs or dicts {"image" or "x", "label"}, batched or not; it must be finite and fit in
`pipeline.DEFAULT_MEMORY_LIMIT_BYTES`, the size up to which the training pipeline holds data in
memory anyway. Larger data belongs in a folder (`--dataset=folder:PATH`) or TFDS.

"train" and "test" are both all the examples (a folder's choice too): evaluation scores
against the training images.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
from typing import Any, Iterator, Sequence

import numpy as np
import tensorflow as tf

from datasets import pipeline
from datasets.errors import DatasetError

PREFIX = "memory:"
CHANNELS = (1, 3)
IMAGE_KEYS = ("image", "x")  # what a dict element names its image
_FINGERPRINT_CHARS = 16


@dataclasses.dataclass(frozen=True, eq=False)
class InMemory:
    """Images float32 [N, H, W, C] in [-1, 1], labels int64 [N] (-1 without), and what they
    are: their class count and names (None without labels), and their fingerprint."""

    images: np.ndarray
    labels: np.ndarray
    num_classes: int | None
    class_names: tuple[str, ...] | None
    fingerprint: str

    @property
    def name(self) -> str:
        """The --dataset value of these arrays."""
        return PREFIX + self.fingerprint

    def describe(self) -> str:
        """"600 images 28x28x1, 10 classes": for messages."""
        classes = "no labels" if self.num_classes is None else f"{self.num_classes} classes"
        return f"{len(self.images)} images {'x'.join(map(str, self.images.shape[1:]))}, {classes}"


def is_memory(name: str) -> bool:
    """Whether a --dataset value names in-memory data ("memory:<fingerprint>")."""
    return name.startswith(PREFIX)


def as_float_images(images: Any, argument: str = "data") -> np.ndarray:
    """`images` as float32 [N, H, W, C] in [-1, 1] (uint8 is scaled, float is checked);
    ValueError naming `argument` for anything else."""
    images = np.asarray(images)
    if images.ndim == 3:
        images = images[..., np.newaxis]
    if images.ndim != 4 or images.shape[-1] not in CHANNELS or not len(images):
        raise ValueError(f"{argument}: images must be [N, H, W, C] with C 1 or 3 (or [N, H, W] "
                         f"grayscale) and N >= 1; got shape {images.shape}.")
    if images.dtype == np.uint8:  # exactly rounded: equal to float64 x / 127.5 - 1 given as float
        return (images / 127.5 - 1).astype(np.float32)
    if not np.issubdtype(images.dtype, np.floating):
        raise ValueError(f"{argument}: images must be uint8 in [0, 255] or float in [-1, 1]; got "
                         f"dtype {images.dtype}. Convert them (e.g. .astype('uint8')).")
    images = images.astype(np.float32)
    low, high = float(np.min(images)), float(np.max(images))
    if not (np.isfinite(low) and np.isfinite(high)) or low < -1 or high > 1:
        raise ValueError(f"{argument}: float images must be finite and in [-1, 1]; these range "
                         f"from {low:g} to {high:g}. Scale them (x / 127.5 - 1 for [0, 255]), or "
                         "pass uint8.")
    return images


def as_labels(labels: Any, count: int, class_names: Sequence[str] | None
              ) -> tuple[np.ndarray, int | None]:
    """(int64 labels [count], class count); -1 and None without labels; ValueError naming
    `labels` or `class_names` for labels of another length, type or range."""
    if labels is None:
        if class_names is not None:
            raise ValueError("class_names without labels: pass labels=, one class index per "
                             "image, or drop class_names.")
        return np.full([count], -1, np.int64), None
    labels = np.asarray(labels)
    if labels.shape != (count,) or not np.issubdtype(labels.dtype, np.integer):
        raise ValueError(f"labels: must be integers [N] with N = {count}, one per image; got "
                         f"dtype {labels.dtype}, shape {labels.shape}.")
    num_classes = len(class_names) if class_names is not None else int(labels.max()) + 1
    if labels.min() < 0 or labels.max() >= num_classes:
        names = "" if class_names is None else f" ({num_classes} class_names)"
        raise ValueError(f"labels: must be class indices 0..{num_classes - 1}{names}; found "
                         f"{int(labels.min())}..{int(labels.max())}.")
    return labels.astype(np.int64), num_classes


def fingerprint(images: np.ndarray, labels: np.ndarray,
                class_names: tuple[str, ...] | None) -> str:
    """A hash of what training reads: equal for equal data, whatever dtype it came in as."""
    digest = hashlib.sha256()
    digest.update(repr((images.shape, class_names)).encode())
    digest.update(np.ascontiguousarray(images).tobytes())
    digest.update(np.ascontiguousarray(labels).tobytes())
    return digest.hexdigest()[:_FINGERPRINT_CHARS]


def from_arrays(images: Any, labels: Any = None,
                class_names: Sequence[str] | None = None) -> InMemory:
    """The in-memory dataset of NumPy (or array-like) images and labels (module docstring)."""
    images = as_float_images(images)
    names = None if class_names is None else tuple(map(str, class_names))
    labels, num_classes = as_labels(labels, len(images), names)
    return InMemory(images=images, labels=labels, num_classes=num_classes, class_names=names,
                    fingerprint=fingerprint(images, labels, names))


def from_dataset(dataset: tf.data.Dataset, class_names: Sequence[str] | None = None,
                 limit_bytes: int = pipeline.DEFAULT_MEMORY_LIMIT_BYTES) -> InMemory:
    """The in-memory dataset of a `tf.data.Dataset`, read once (module docstring)."""
    examples = as_examples(dataset)
    endless = examples.cardinality() == tf.data.INFINITE_CARDINALITY
    held = None if endless else pipeline.hold_in_memory(examples, limit_bytes=limit_bytes)
    if held is None:
        raise ValueError(
            f"data: a tf.data.Dataset is read into memory once, so it must be finite, non-empty, "
            f"of one example shape, and at most {limit_bytes / 2**30:g} GiB; "
            f"this one is not (cardinality {int(examples.cardinality())}, elements "
            f"{examples.element_spec}). Take a part of it, or write the images to a folder and "
            "use --dataset=folder:PATH.")
    labels = held.get("label")
    return from_arrays(held["x"].numpy(), None if labels is None else labels.numpy(), class_names)


def as_examples(dataset: tf.data.Dataset) -> tf.data.Dataset:
    """Unbatched examples {"x": image[, "label"]} of a dataset of images, (image, label) pairs or
    dicts {"image" or "x", "label"}, batched (images of rank 4) or not; ValueError else."""
    spec = dataset.element_spec
    if isinstance(spec, dict):
        keys = [key for key in IMAGE_KEYS if key in spec]
        if len(keys) != 1 or set(spec) - {keys[0], "label"}:
            raise ValueError(f"data: a dataset of dicts needs one image key ({' or '.join(IMAGE_KEYS)})"
                             f" and optionally 'label'; got keys {sorted(spec)}.")
        dataset = dataset.map(lambda element: {"x": element[keys[0]], **(
            {"label": element["label"]} if "label" in element else {})})
    elif isinstance(spec, tuple) and len(spec) == 2:
        dataset = dataset.map(lambda image, label: {"x": image, "label": label})
    elif isinstance(spec, tf.TensorSpec):
        dataset = dataset.map(lambda image: {"x": image})
    else:
        raise ValueError(f"data: a dataset must give images, (image, label) pairs or dicts with an "
                         f"image and a label; got elements {spec}.")
    rank = dataset.element_spec["x"].shape.rank
    if rank not in (2, 3, 4):
        raise ValueError(f"data: images must be [H, W, C] (or [H, W]) per example, or batches of "
                         f"[B, H, W, C]; got elements of shape {dataset.element_spec['x'].shape}.")
    return dataset.unbatch() if rank == 4 else dataset


_SUPPLIED: dict[str, InMemory] = {}


@contextlib.contextmanager
def supplied(data: InMemory | None) -> Iterator[None]:
    """Makes `data` readable by its name (`lookup`) inside the block (nothing for None)."""
    added = data is not None and data.name not in _SUPPLIED
    if added:
        _SUPPLIED[data.name] = data
    try:
        yield
    finally:
        if added:
            del _SUPPLIED[data.name]


def lookup(name: str) -> InMemory:
    """The in-memory data named `name`; DatasetError when this process was not given it."""
    if name not in _SUPPLIED:
        raise DatasetError(
            f"--dataset={name} is in-memory data (fingerprint {name[len(PREFIX):]}) given to "
            "api.train; it exists only in the Python process that passed it. Pass the same arrays "
            "again (api.train(config, data=...), api.evaluate(logdir, data=...)).")
    return _SUPPLIED[name]


def examples(name: str) -> tf.data.Dataset:
    """The unbatched examples {"x": float32, "label": int64} of in-memory data `name`."""
    data = lookup(name)
    return tf.data.Dataset.from_tensor_slices({"x": data.images, "label": data.labels})


def check_resume(recorded: str, given: str, logdir: str) -> None:
    """Refuses to resume a run trained on in-memory data `recorded` with other data `given`
    (both --dataset values), saying which data the run needs; nothing for other runs."""
    if not is_memory(recorded) or recorded == given:
        return
    needed = (f"The run in {logdir} was trained on in-memory data of fingerprint "
              f"{recorded[len(PREFIX):]} (passed to api.train)")
    if is_memory(given):
        raise DatasetError(
            f"{needed}; the data given now has fingerprint {given[len(PREFIX):]}. Resume with the "
            "same arrays (same values, order, labels and class names), or train a new run in a "
            "new logdir.")
    raise DatasetError(
        f"{needed}, and --dataset={given} was given instead. Resume it from Python with the same "
        "arrays: api.train(config, data=images, labels=labels).")
