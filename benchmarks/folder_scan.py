"""What a `--dataset=folder:PATH` costs before training: the header scan behind `dataset_info`
(cold, then warm from the per-file cache) and decoding the folder into memory as the input
pipeline holds it.

    .venv/bin/python benchmarks/folder_scan.py --folder=/tmp/folder_bench --images=4000

Writes `--images` random RGB PNGs of `--side` px into 10 class sub-folders of `--folder` when
it does not exist yet, then prints one Markdown table row.
"""

import argparse
import os
import sys
import time

import numpy as np
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from datasets import pipeline, registry  # noqa: E402


def write_folder(root: str, images: int, side: int) -> None:
    rng = np.random.default_rng(0)
    for index in range(images):
        path = os.path.join(root, f"c{index % 10}", f"{index:05d}.png")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        Image.fromarray(rng.integers(0, 256, (side, side, 3), dtype=np.uint8)).save(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", required=True)
    parser.add_argument("--images", type=int, default=4000)
    parser.add_argument("--side", type=int, default=64)
    args = parser.parse_args()
    if not os.path.isdir(args.folder):
        write_folder(args.folder, args.images, args.side)
    name = f"folder:{args.folder}"
    start = time.perf_counter()
    info = registry.dataset_info(name)
    cold = time.perf_counter() - start
    start = time.perf_counter()
    registry.dataset_info(name)
    warm = time.perf_counter() - start
    examples = registry.load_split(name, split="train", data_dir=None, fashion_mnist_dir=None,
                                   resolution=None, seed=0)
    start = time.perf_counter()
    held = pipeline.hold_in_memory(examples, pipeline.DEFAULT_MEMORY_LIMIT_BYTES)
    hold = time.perf_counter() - start
    print("| images | shape | classes | scan, cold (s) | scan, warm (s) | decode into memory (s) | held (MiB) |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    print(f"| {info.num_examples} | {info.shape} | {info.num_classes} | {cold:.2f} | {warm:.2f} "
          f"| {hold:.2f} | {held['x'].numpy().nbytes / 2**20:.0f} |")


if __name__ == "__main__":
    main()
