"""The two image domains of an unpaired translation task (`--domain_a`, `--domain_b`).

A domain is written `DATASET[:CLASS[,CLASS...]]`:
  fashion_mnist:Sneaker              one class, by name (any case) ...
  fashion_mnist:7                    ... or by index
  fashion_mnist:Sneaker,Sandal       several classes: their union
  tfds:cifar10:cat                   any labelled TFDS image dataset
  tfds:mnist                         no classes: the whole dataset
  folder:/data/photos                a folder of images (`datasets.folders`): all of it
Its examples are those of the dataset's "train" (training) and "test" (summaries, evaluation)
splits whose label is one of the classes.

Some TFDS datasets store each domain as its own pair of splits instead: TFDS's `cycle_gan`
family (horse2zebra, apple2orange, monet2photo, ...) has splits trainA, trainB, testA and
testB, and labels "A" and "B". For those (`SPLIT_DOMAIN_DATASETS`) the one class names the
splits: `tfds:cycle_gan/horse2zebra:A` is trainA / testA. Their images come in varying
sizes, so they need `--resolution`.

Everything is checked from metadata alone (`registry.dataset_info`), before data is read.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Callable, Mapping

import tensorflow as tf

from datasets import folders, registry
from datasets.errors import DatasetError

TRAIN_SPLIT, TEST_SPLIT = "train", "test"
# TFDS builders (the name before any "/config") whose domains are splits "<split><CLASS>".
SPLIT_DOMAIN_DATASETS = ("cycle_gan",)
_TFDS_PREFIX = "tfds:"
# "tfds:NAME" with an optional TFDS version "X.Y.Z" (digits or *), then ":CLASSES".
_TFDS_SPEC = re.compile(r"(tfds:[^:]+(?::\d+\.[\d*]+\.[\d*]+)?)(?::(.*))?")


@dataclasses.dataclass(frozen=True)
class Domain:
    """One parsed domain: where its examples come from and which labels it keeps.

    `classes` are label indices (empty: every example); `spec` is the flag value as given;
    `shape` is that of its images ("x") at the resolution it was parsed for; `num_examples`
    its training images where the metadata says: a whole dataset's, None for picked classes
    (only reading the labels would count them).
    """

    spec: str
    dataset: str
    classes: tuple[int, ...]
    train_split: str
    test_split: str
    shape: tuple[int, ...]
    num_examples: int | None = None


def parse_domain(spec: str, *, flag: str, resolution: int | None,
                 channels: int | None = None) -> Domain:
    """`DATASET[:CLASS[,CLASS...]]` -> Domain at `resolution` (and `channels`, for a folder:
    other datasets keep their own, so a folder converts to match one) (see the module
    docstring); DatasetError, naming `--flag`, the value and the valid class names, for
    anything else."""
    dataset, classes_text = _split_spec(spec, flag)
    try:
        info = registry.dataset_info(dataset, resolution=resolution,
                                     channels=_folder_channels(dataset, channels))
    except DatasetError as error:
        raise DatasetError(f"--{flag}={spec!r}: {error}") from None
    if info.kind != registry.IMAGE:
        raise DatasetError(f"--{flag}={spec!r}: {dataset} is a toy (2-D points), not images; a "
                           "domain must be an image dataset such as fashion_mnist:Sneaker.")
    names = info.class_names
    split_domains = _builder_name(dataset) in SPLIT_DOMAIN_DATASETS
    if classes_text is None:
        if split_domains:
            raise DatasetError(f"--{flag}={spec!r}: {dataset} keeps each domain in its own "
                               f"splits; name one, e.g. {dataset}:{names[0] if names else 'A'}.")
        return Domain(spec, dataset, (), TRAIN_SPLIT, TEST_SPLIT, info.shape, info.num_examples)
    if not names:
        raise DatasetError(f"--{flag}={spec!r}: {dataset} has no class labels to select; use "
                           f"the whole dataset: --{flag}={dataset}.")
    classes = tuple(dict.fromkeys(_class_index(item, flag, spec, names)
                                  for item in classes_text.split(",")))
    if not split_domains:
        return Domain(spec, dataset, classes, TRAIN_SPLIT, TEST_SPLIT, info.shape)
    if len(classes) != 1:
        raise DatasetError(f"--{flag}={spec!r}: {dataset} has one domain per split pair; name "
                           f"exactly one of {', '.join(names)}.")
    name = names[classes[0]]
    return Domain(spec, dataset, classes, TRAIN_SPLIT + name, TEST_SPLIT + name, info.shape)


def pair_info(domain_a: Domain, domain_b: Domain) -> registry.DatasetInfo:
    """The DatasetInfo a translation setup is built from. The domains must differ and share one
    image shape (each generator maps one domain's shape to the other's)."""
    if (domain_a.dataset, domain_a.classes, domain_a.train_split) == (
            domain_b.dataset, domain_b.classes, domain_b.train_split):
        raise DatasetError(f"--domain_a={domain_a.spec!r} and --domain_b={domain_b.spec!r} are "
                           "the same domain; translate between two different ones.")
    if domain_a.shape != domain_b.shape:
        raise DatasetError(
            f"--domain_a={domain_a.spec!r} gives images of shape {domain_a.shape} but "
            f"--domain_b={domain_b.spec!r} gives {domain_b.shape}; the domains need one "
            "shape: set --resolution, and pick datasets with the same number of channels.")
    return registry.DatasetInfo(name=f"{domain_a.spec} <-> {domain_b.spec}", kind=registry.IMAGE,
                                shape=domain_a.shape, num_classes=None, num_examples=None,
                                modes=None, mode_std=None)


def load_domain(domain: Domain, *, split: str, data_dir: str | None,
                fashion_mnist_dir: str | None, resolution: int | None,
                seed: int, channels: int | None = None) -> tf.data.Dataset:
    """Unshuffled {"x", "label"} examples of `domain`'s training (`split="train"`) or test
    (`split="test"`) split, as `registry.load_split` yields them, keeping only its classes."""
    if split not in (TRAIN_SPLIT, TEST_SPLIT):
        raise ValueError(f"load_domain needs split 'train' or 'test', got {split!r}.")
    examples = registry.load_split(
        domain.dataset, split=domain.train_split if split == TRAIN_SPLIT else domain.test_split,
        data_dir=data_dir, fashion_mnist_dir=fashion_mnist_dir, resolution=resolution, seed=seed,
        channels=_folder_channels(domain.dataset, channels))
    if not domain.classes:
        return examples
    kept = tf.constant(domain.classes, tf.int64)
    return examples.filter(lambda example: tf.reduce_any(tf.equal(example["label"], kept)))


def training_images(domains: Mapping[str, Domain], **load) -> Callable[[], dict[str, tf.data.Dataset]]:
    """``fn() -> {name: images}``: each domain's training images ("x" alone), finite and
    unshuffled, for `pipeline.training_input_fn`, which shuffles and repeats each on its own
    and zips them into unpaired examples {name: image}. `load` are `load_domain`'s keywords."""
    return lambda: {name: load_domain(domain, split=TRAIN_SPLIT, **load).map(lambda e: e["x"])
                    for name, domain in domains.items()}


def _folder_channels(dataset: str, channels: int | None) -> int | None:
    """--channels applies to folder domains only."""
    return channels if folders.is_folder(dataset) else None


def _split_spec(spec: str, flag: str) -> tuple[str, str | None]:
    """(dataset name, class list text or None when the spec names no classes)."""
    text = spec.strip()
    if folders.is_folder(text):  # a path may hold ":": the whole spec is the folder
        return text, None
    if text.startswith(_TFDS_PREFIX):
        match = _TFDS_SPEC.fullmatch(text)
        dataset, classes = (match.group(1), match.group(2)) if match else (text, None)
    else:
        dataset, colon, classes = text.partition(":")
        classes = classes if colon else None
    empty_class = classes is not None and "" in [item.strip() for item in classes.split(",")]
    if not dataset or dataset == _TFDS_PREFIX or empty_class:
        raise DatasetError(
            f"--{flag}={spec!r} is not a domain: write DATASET[:CLASS[,CLASS...]], e.g. "
            f"fashion_mnist:Sneaker, fashion_mnist:5,7 or tfds:cycle_gan/horse2zebra:A.")
    return dataset, classes


def _class_index(item: str, flag: str, spec: str, names: tuple[str, ...]) -> int:
    """A class by index or by name in any case; DatasetError listing the names otherwise."""
    text = item.strip()
    if text.isdigit() and int(text) < len(names):
        return int(text)
    folded = [name.casefold() for name in names]
    if text.casefold() in folded:
        return folded.index(text.casefold())
    raise DatasetError(
        f"--{flag}={spec!r}: no class {text!r}; use an index 0..{len(names) - 1} or a name "
        f"(any case): {', '.join(map(repr, names))}.")


def _builder_name(dataset: str) -> str:
    """"tfds:cycle_gan/horse2zebra:3.0.0" -> "cycle_gan"; "" for non-TFDS names."""
    if not dataset.startswith(_TFDS_PREFIX):
        return ""
    return dataset[len(_TFDS_PREFIX):].split(":")[0].split("/")[0]

