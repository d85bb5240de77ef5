"""Folders of small image files written by the tests of `--dataset=folder:PATH`."""

import os

import numpy as np
from PIL import Image


def write_image(path: str, pixels: np.ndarray) -> str:
    """Writes uint8 `pixels` (H, W) or (H, W, C) to `path`, in the format its extension names."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    Image.fromarray(np.asarray(pixels, np.uint8)).save(path)
    return path


def pattern(index: int, side: int, channels: int) -> np.ndarray:
    """A recognisable uint8 image: a diagonal gradient offset by `index`, per channel."""
    rows, columns = np.mgrid[0:side, 0:side]
    base = (rows * 5 + columns * 3 + 17 * index) % 256
    image = np.stack([(base + 60 * channel) % 256 for channel in range(channels)], axis=-1)
    return image.astype(np.uint8)[..., 0] if channels == 1 else image.astype(np.uint8)


def write_folder(root: str, counts: dict[str, int] | int, *, side: int = 32,
                 channels: int = 3) -> str:
    """`counts` PNGs of `pattern`s under `root`: an int writes them loose in `root`, a mapping
    {class: count} writes one sub-folder per class. Returns `root`."""
    groups = {"": counts} if isinstance(counts, int) else counts
    index = 0
    for name, count in groups.items():
        for _ in range(count):
            write_image(os.path.join(root, name, f"{index:03d}.png"),
                        pattern(index, side, channels))
            index += 1
    return root
