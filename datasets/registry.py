"""The names run.py accepts for --dataset, what each yields, and where its examples come from.

Names: "fashion_mnist" (datasets.fashion_mnist), "stacked_fashion_mnist" (datasets.stacked: three
Fashion-MNIST images as RGB, labelled by their 1,000 class triples), "ring8" and "grid25" (datasets.toys),
"tfds:<name>" for any TFDS image dataset (datasets.tfds_source), "folder:PATH" for a folder of
image files (datasets.folders) and "memory:<fingerprint>" for arrays given to `api.train`
(datasets.memory). `dataset_info` answers from code, TFDS metadata and file headers
alone, so flags can be checked before anything is built, decoded or downloaded; `load_split`
produces the examples. `channels` (--channels) converts a folder's images to 1 or 3 channels.
"""

import dataclasses
from typing import Any

import numpy as np
import tensorflow as tf

from datasets import fashion_mnist, folders, memory, pipeline, stacked, tfds_source, toys
from datasets.errors import DatasetError

__all__ = ["DatasetError", "DatasetInfo", "KNOWN_NAMES", "CHANNELS", "IMAGE", "TOY", "cache_key",
           "channel_source", "dataset_info", "info_as_record", "info_from_record", "load_split", "training_examples"]

KNOWN_NAMES = ("fashion_mnist", stacked.NAME, *toys.TOY_NAMES, "tfds:<name>", "folder:PATH",
               "memory:<fingerprint> (arrays given to api.train)")
# The kinds of data (`DatasetInfo.kind`): images, or a toy's 2-D points.
IMAGE, TOY = "image", "toy"
# Kinds older versions recorded in LOGDIR/dataset.json under another word: read as today's.
OLD_KIND_WORDS = {"points": TOY}
CHANNELS = (1, 3)  # what --channels converts a folder's images to
_TFDS_PREFIX = "tfds:"


@dataclasses.dataclass(frozen=True)
class DatasetInfo:
    name: str
    kind: str  # IMAGE or TOY
    shape: tuple[int, ...]  # per-example shape of "x" after preprocessing: (H, W, C) or (2,)
    # 10 for fashion_mnist, 1,000 for stacked_fashion_mnist and 8 / 25 for the toys (label = mode)
    num_classes: int | None
    num_examples: int | None  # training split size; None for infinite toy streams or unknown
    modes: np.ndarray | None  # toys only: the (num_modes, 2) mode centres
    mode_std: float | None  # toys only
    # Label names by index (images with labels): what --label and --domain_a/b accept by name.
    class_names: tuple[str, ...] | None = None


def info_as_record(info: DatasetInfo) -> dict[str, Any]:
    """`info` as a JSON object (a run's record of what it trained on): tuples and the toys'
    mode centres become lists; `info_from_record` turns it back."""
    record = dataclasses.asdict(info)
    return {**record, "shape": list(info.shape),
            "modes": None if info.modes is None else info.modes.tolist(),
            "class_names": None if info.class_names is None else list(info.class_names)}


def info_from_record(record: dict[str, Any]) -> DatasetInfo:
    """The DatasetInfo `info_as_record` wrote, also an older version's (a toy's kind was
    "points"); TypeError (naming a missing or unknown field) or ValueError for an object that is
    not one."""
    info = DatasetInfo(**record)
    return dataclasses.replace(
        info, kind=OLD_KIND_WORDS.get(info.kind, info.kind),
        shape=tuple(int(side) for side in info.shape),
        modes=None if info.modes is None else np.asarray(info.modes, np.float32),
        class_names=None if info.class_names is None else tuple(map(str, info.class_names)))


def dataset_info(name: str, *, resolution: int | None = None,
                 channels: int | None = None) -> DatasetInfo:
    """What `load_split(name, resolution=resolution, channels=channels, ...)` will yield; no
    data is decoded, nothing is downloaded.

    resolution: None keeps the native size (28 for fashion_mnist); N resizes images to N x N.
    channels: None keeps the images' own; 1 or 3 converts (folders only).
    """
    _check_resolution(name, resolution)
    _check_channels(name, channels)
    if folders.is_folder(name):
        found = folders.scan(name)
        names = found.class_names
        return DatasetInfo(
            name=name, kind=IMAGE,
            shape=folders.image_shape(name, found, resolution=resolution, channels=channels),
            num_classes=len(names) if names else None, num_examples=len(found.files),
            modes=None, mode_std=None, class_names=names)
    if memory.is_memory(name):
        data = memory.lookup(name)
        return DatasetInfo(name=name, kind=IMAGE, shape=data.images.shape[1:],
                           num_classes=data.num_classes, num_examples=len(data.images),
                           modes=None, mode_std=None, class_names=data.class_names)
    if name == fashion_mnist.NAME:
        height, width, channels = fashion_mnist.IMAGE_SHAPE
        shape = (resolution, resolution, channels) if resolution else (height, width, channels)
        return DatasetInfo(
            name=name,
            kind=IMAGE,
            shape=shape,
            num_classes=fashion_mnist.NUM_CLASSES,
            num_examples=fashion_mnist.NUM_TRAIN_EXAMPLES,
            modes=None,
            mode_std=None,
            class_names=fashion_mnist.CLASS_NAMES,
        )
    if name == stacked.NAME:
        side = resolution or fashion_mnist.IMAGE_SHAPE[0]
        return DatasetInfo(name=name, kind=IMAGE, shape=(side, side, stacked.CHANNELS),
                           num_classes=stacked.NUM_MODES,
                           num_examples=stacked.NUM_EXAMPLES["train"], modes=None,
                           mode_std=None, class_names=stacked.class_names())
    if name in toys.TOY_NAMES:
        modes, std = toys.toy_modes(name)
        return DatasetInfo(
            name=name,
            kind=TOY,
            shape=(2,),
            num_classes=len(modes),
            num_examples=None,
            modes=modes,
            mode_std=std,
        )
    builder = tfds_source.builder(_tfds_name(name), data_dir=None)
    shape, class_names = tfds_source.image_spec(builder, resolution=resolution)
    train = builder.info.splits.get("train")
    return DatasetInfo(
        name=name,
        kind=IMAGE,
        shape=shape,
        num_classes=len(class_names) if class_names else None,
        num_examples=train.num_examples if train else None,
        modes=None,
        mode_std=None,
        class_names=class_names,
    )


def load_split(
    name: str,
    *,
    split: str = "train",
    data_dir: str | None = None,
    fashion_mnist_dir: str | None = None,
    resolution: int | None = None,
    seed: int = 0,
    channels: int | None = None,
) -> tf.data.Dataset:
    """Unbatched, unshuffled examples {"x": float32, "label": int64} of `split` of `name`.

    Images: finite, "x" HWC in [-1, 1], prepared into data_dir (None: TFDS's default) if needed.
    A folder's, and in-memory data's, "train" and "test" are both all its images.
    Toys: an infinite stream that is a pure function of (seed, split); "test" differs from "train".
    """
    _check_resolution(name, resolution)
    _check_channels(name, channels)
    if folders.is_folder(name):
        return folders.examples(name, split=split, resolution=resolution, channels=channels)
    if memory.is_memory(name):
        return memory.examples(name)
    if name in toys.TOY_NAMES:
        return toys.toy_stream(name, split=split, seed=seed)
    if name == stacked.NAME:
        source = load_split(stacked.SOURCE, split=split, data_dir=data_dir,
                            fashion_mnist_dir=fashion_mnist_dir, resolution=resolution)
        return stacked.examples(source, split)
    if name == fashion_mnist.NAME:
        builder = fashion_mnist.prepared_builder(
            data_dir=data_dir, fashion_mnist_dir=fashion_mnist_dir
        )
    else:
        builder = tfds_source.builder(_tfds_name(name), data_dir=data_dir)
        tfds_source.ensure_prepared(builder)
    return tfds_source.examples(builder, split=split, resolution=resolution)


def training_examples(
    name: str,
    *,
    data_dir: str | None,
    fashion_mnist_dir: str | None,
    resolution: int | None,
    seed: int,
    channels: int | None = None,
) -> tf.data.Dataset | pipeline.Chunks:
    """The training split as `pipeline.training_input_fn` takes it: a toy's stream as
    `pipeline.Chunks` (re-sliced into batches whole), anything else as `load_split` gives it."""
    if name in toys.TOY_NAMES:
        _check_resolution(name, resolution)
        return pipeline.Chunks(toys.toy_chunks(name, split="train", seed=seed))
    return load_split(name, split="train", data_dir=data_dir, fashion_mnist_dir=fashion_mnist_dir,
                      resolution=resolution, seed=seed, channels=channels)


def cache_key(name: str, channels: int | None = None) -> str:
    """The dataset's name in caches keyed by dataset (the domain evaluator's): the name
    itself (in-memory data's with "_" for ":", a file name), or for a folder a key distinct for
    every folder and --channels (`folders.cache_key`)."""
    if memory.is_memory(name):
        return name.replace(":", "_")
    return folders.cache_key(name, channels) if folders.is_folder(name) else name


def channel_source(name: str) -> str | None:
    """The dataset whose images `name` stacks as its channels (stacked_fashion_mnist:
    fashion_mnist), else None. Its domain evaluator is that dataset's, classifying each channel
    (`gan.evaluator`)."""
    return stacked.SOURCE if name == stacked.NAME else None


def _tfds_name(name: str) -> str:
    """The TFDS name inside "tfds:<name>"; any other unknown name is a DatasetError."""
    tfds_name = name[len(_TFDS_PREFIX) :] if name.startswith(_TFDS_PREFIX) else ""
    if not tfds_name:
        raise DatasetError(f"--dataset={name!r} is unknown: use one of {', '.join(KNOWN_NAMES)}.")
    return tfds_name


def _check_channels(name: str, channels: int | None) -> None:
    if channels is None:
        return
    if channels not in CHANNELS:
        raise DatasetError(f"--channels={channels!r} is invalid: use 1 (grayscale) or 3 (RGB), or "
                           "leave it unset to keep the images' own.")
    if not folders.is_folder(name):
        raise DatasetError(f"--channels={channels} converts the images of a folder:PATH dataset; "
                           f"--dataset={name} has its own channels: leave --channels unset.")


def _check_resolution(name: str, resolution: int | None) -> None:
    if resolution is None:
        return
    if not isinstance(resolution, int) or resolution < 1:
        raise DatasetError(
            f"--resolution={resolution!r} must be a positive integer, or unset for native size."
        )
    if memory.is_memory(name):
        raise DatasetError(
            f"--resolution={resolution} resizes named datasets; --dataset={name} is arrays given "
            "to api.train, trained at their own size: leave --resolution unset, or resize the "
            "arrays.")
    if name in toys.TOY_NAMES:
        raise DatasetError(
            f"--resolution={resolution} applies to image datasets only; "
            f"--dataset={name} is a toy (2-D points): leave --resolution unset."
        )
