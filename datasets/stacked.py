"""Stacked Fashion-MNIST (`--dataset=stacked_fashion_mnist`): 1,000 modes to count.

An example stacks three Fashion-MNIST images of one split as its R, G and B channels, each
drawn independently and uniformly (with replacement); its label is its mode, the triple of the
three images' classes read as one number: c0 * 100 + c1 * 10 + c2 (`mode_index`). This is
StackedMNIST (VEEGAN, PacGAN, R3GAN) with Fashion-MNIST's images: a generator covers a mode when
the domain evaluator, which classifies each channel, assigns some sample that triple
(`gan.mode_coverage`).

Which images are stacked is fixed: the triples of a split are drawn once from a constant seed
(`TRIPLE_SEED`, not --seed), so the dataset is the same in every run, as any other dataset is;
--seed orders it, through the training pipeline's seeded shuffle, and a resumed run sees the
same examples in the same order. The train split has as many examples as Fashion-MNIST's
(60,000), the test split too (10,000): the mode metrics compare generated samples with the
uniform distribution over modes and need no real images; FID and its kin take their first
--eval_samples.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from datasets import fashion_mnist

NAME = "stacked_fashion_mnist"
SOURCE = fashion_mnist.NAME  # whose images are stacked, and whose evaluator classifies them
CHANNELS = 3
NUM_MODES = fashion_mnist.NUM_CLASSES ** CHANNELS
NUM_EXAMPLES = {"train": fashion_mnist.NUM_TRAIN_EXAMPLES, "test": fashion_mnist.NUM_TEST_EXAMPLES}
TRIPLE_SEED = 48
_SPLIT_IDS = {"train": 0, "test": 1}
_STACK_BATCH = 1000  # examples stacked per gather


def mode_index(classes, num_classes: int = fashion_mnist.NUM_CLASSES) -> np.ndarray:
    """Class triples [..., 3] (R, G, B) -> their modes [...]: c0 * K^2 + c1 * K + c2."""
    classes = np.asarray(classes)
    return np.ravel_multi_index(tuple(np.moveaxis(classes, -1, 0)), (num_classes,) * classes.shape[-1])


def mode_classes(modes, num_classes: int = fashion_mnist.NUM_CLASSES,
                 channels: int = CHANNELS) -> np.ndarray:
    """The inverse of `mode_index`: modes [...] -> class triples [..., channels]."""
    return np.stack(np.unravel_index(np.asarray(modes), (num_classes,) * channels), axis=-1)


def class_names() -> tuple[str, ...]:
    """Each mode's name, its three classes joined by "+" ("T-shirt/top+Trouser+Bag"), so
    --label and a domain accept a mode by name as by index."""
    return tuple("+".join(fashion_mnist.CLASS_NAMES[c] for c in triple)
                 for triple in mode_classes(np.arange(NUM_MODES)))


def triples(split: str, source_size: int) -> np.ndarray:
    """The [NUM_EXAMPLES[split], 3] indices into the source split of the images each example
    stacks: uniform, independent, from a seed fixed per split (see the module docstring)."""
    if split not in _SPLIT_IDS:
        raise ValueError(f"split={split!r} does not exist for --dataset={NAME}: use 'train' or "
                         "'test'.")
    rng = np.random.default_rng([TRIPLE_SEED, _SPLIT_IDS[split]])
    return rng.integers(0, source_size, size=(NUM_EXAMPLES[split], CHANNELS), dtype=np.int64)


def examples(source: tf.data.Dataset, split: str) -> tf.data.Dataset:
    """Unshuffled {"x": [H, W, 3], "label": mode} of `split` from `source`, that split of
    Fashion-MNIST as `registry.load_split` yields it ({"x": [H, W, 1], "label"}), read into
    memory once (190 MB at 28 px for the train split)."""
    held = {key: [] for key in ("x", "label")}
    for batch in source.batch(10_000).as_numpy_iterator():
        for key in held:
            held[key].append(batch[key])
    images = tf.constant(np.concatenate(held["x"]))
    labels = np.concatenate(held["label"])
    chosen = triples(split, len(labels))
    modes = mode_index(labels[chosen]).astype(np.int64)

    def stack(indices: tf.Tensor, mode: tf.Tensor) -> dict[str, tf.Tensor]:
        channels = tf.gather(images, indices)[..., 0]  # [batch, 3, H, W]
        return {"x": tf.transpose(channels, [0, 2, 3, 1]), "label": mode}

    return (tf.data.Dataset.from_tensor_slices((chosen, modes)).batch(_STACK_BATCH)
            .map(stack).unbatch())
