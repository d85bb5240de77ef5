"""Turning generator output into pictures: uint8 conversion, sample grids, 2-D scatter plots.

Everything here is a pure function of its inputs (plus `save_samples`, which writes one file),
works on NumPy arrays or eager TensorFlow tensors, and never imports TensorFlow itself, so it
can be used from summaries, from `run.py --output`, and from tests alike.

Plots are drawn on a `matplotlib.figure.Figure` with an explicit Agg canvas rather than through
`pyplot`: no global figure registry to leak into, no dependence on which backend the process
selected, and safe to call from a training loop that never shows a window.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence

import numpy as np

from datasets import files

SAMPLE_EXTENSIONS = (".npy", ".png")
# The grid's separator lines, border and empty cells: mid-gray, visible against the black
# background of Fashion-MNIST-like samples as well as against white ones and TensorBoard's page.
SEPARATOR = 128


def to_uint8(images) -> np.ndarray:
    """Maps float pixels in [-1, 1] to uint8 in [0, 255], rounding half up and clipping.

    -1 -> 0, 0 -> 128 (127.5 rounds up), 1 -> 255; anything outside [-1, 1] saturates, because a
    generator overshooting its tanh range is normal and should render, not crash. NaN is refused:
    it has no pixel value, and silently painting it black would hide a diverged generator.
    The shape is kept as given (NHWC for images, but any shape works).
    """
    array = np.asarray(images)
    if not np.issubdtype(array.dtype, np.floating):
        raise ValueError(
            f"to_uint8 expects floating-point pixels in [-1, 1], got dtype {array.dtype}; "
            "convert with x / 127.5 - 1 first if these are already 0..255 integers"
        )
    if np.isnan(array).any():
        raise ValueError(
            f"to_uint8 got {int(np.isnan(array).sum())} NaN pixel(s) out of {array.size}; "
            "the generator output is not finite"
        )
    scaled = np.floor((np.clip(array.astype(np.float64), -1.0, 1.0) + 1.0) * 127.5 + 0.5)
    return scaled.astype(np.uint8)


def grid_shape(count: int, rows: int | None = None) -> tuple[int, int]:
    """(rows, cols) for laying out `count` cells.

    Without `rows` the grid is as square as possible with cols >= rows (cols = ceil(sqrt(count)),
    rows = ceil(count / cols)), so 16 -> (4, 4), 10 -> (3, 4), 2 -> (1, 2). With `rows` given,
    cols = ceil(count / rows); rows larger than count is allowed and leaves blank rows.
    """
    if count < 1:
        raise ValueError(f"grid_shape needs count >= 1, got {count!r}; there is nothing to lay out")
    if rows is not None:
        if rows < 1:
            raise ValueError(f"grid_shape needs rows >= 1 or None, got {rows!r}")
        return rows, math.ceil(count / rows)
    cols = math.ceil(math.sqrt(count))
    return math.ceil(count / cols), cols


def image_grid(images, *, rows: int | None = None, padding: int = 1) -> np.ndarray:
    """Tiles a batch [N, H, W, C] in [-1, 1] into one uint8 image of shape [1, gridH, gridW, C].

    The leading 1 is the batch axis `tf.summary.image` expects. Cells are filled row-major
    (image i at row i // cols, column i % cols). `padding` pixels of SEPARATOR gray separate
    cells AND surround the grid on the outer border, so gridH = rows * H + (rows + 1) * padding
    (and likewise for the width): every cell then has the same frame, which keeps tiles apart
    on black sample backgrounds and on TensorBoard's light page alike. Unused trailing cells are
    SEPARATOR gray too, so they cannot pass for a black sample. C must be 1 (grayscale) or 3
    (RGB) and is kept.
    """
    if padding < 0:
        raise ValueError(f"image_grid needs padding >= 0, got {padding!r}")
    return _tile(_nhwc_uint8(images, "image_grid"), rows=rows, padding=padding)


def scatter_plot(
    points,
    *,
    modes=None,
    title: str | None = None,
    limits: Sequence[float] | None = None,
    size_px: int = 400,
) -> np.ndarray:
    """Draws 2-D samples (N, 2) over the true mode centres (M, 2); returns uint8 RGB [1, H, W, 3].

    Samples are small translucent blue dots; modes are red crosses drawn on top, so a dropped
    mode shows as a cross with no cloud around it. Axis limits decide whether frames from
    different steps can be compared, so they are fixed, in priority order, by:
      - `limits` = (xmin, xmax, ymin, ymax), as matplotlib's `axis()` takes them;
      - `modes`: a square window centred on the modes, half-width = half their largest extent
        plus a margin of a quarter of that extent (1.0 when all modes coincide);
      - otherwise matplotlib autoscales to the points (frames are then not comparable).
    The output is size_px x size_px pixels.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    samples = _as_points(points, "points")
    centres = None if modes is None else _as_points(modes, "modes")
    if size_px < 64:
        raise ValueError(f"scatter_plot needs size_px >= 64 to fit the axes, got {size_px!r}")
    if limits is not None and len(limits) != 4:
        raise ValueError(f"scatter_plot limits must be (xmin, xmax, ymin, ymax), got {limits!r}")

    dpi = 100
    figure = Figure(figsize=(size_px / dpi, size_px / dpi), dpi=dpi)
    canvas = FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    axes.scatter(samples[:, 0], samples[:, 1], s=4, c="tab:blue", alpha=0.4, linewidths=0)
    if centres is not None:
        axes.scatter(centres[:, 0], centres[:, 1], s=60, c="tab:red", marker="x", zorder=3)
    if limits is None and centres is not None and len(centres):
        limits = _limits_around(centres)
    if limits is not None:
        axes.set_xlim(limits[0], limits[1])
        axes.set_ylim(limits[2], limits[3])
    axes.set_aspect("equal", adjustable="box" if limits is not None else "datalim")
    if title is not None:
        axes.set_title(title)
    figure.tight_layout()
    canvas.draw()
    rgb = np.asarray(canvas.buffer_rgba())[..., :3]
    return rgb[np.newaxis].copy()


def save_samples(images, path: str, *, rows: int | None = None) -> None:
    """Writes generated images [N, H, W, C] in [-1, 1] to `path`; the extension picks the format.

    .npy: the uint8 NHWC batch (np.save), for exact reuse by scripts; `rows` does not apply.
    .png: the `image_grid` of the batch with padding 1, for looking at: a grayscale PNG (one
    8-bit channel) when C == 1, RGB when C == 3. Parent directories are created. The file is written atomically
    (`files.write_atomically`), so a crash or a reader racing the writer never sees half of it.
    """
    extension = _sample_extension(path)
    pixels = _nhwc_uint8(images, "save_samples")
    if extension == ".npy":
        files.write_atomically(path, lambda handle: np.save(handle, pixels))
    else:
        files.write_atomically(path, lambda handle: _write_png(handle, _tile(pixels, rows=rows, padding=1)[0]))


def save_points(points, path: str, *, modes=None) -> None:
    """Writes generated 2-D points (N, 2) to `path`: .npy keeps the float32 coordinates, .png
    draws `scatter_plot` over the true modes. Written atomically like `save_samples`."""
    extension = _sample_extension(path)
    array = _as_points(points, "points").astype(np.float32)
    if extension == ".npy":
        files.write_atomically(path, lambda handle: np.save(handle, array))
    else:
        plot = scatter_plot(array, modes=modes)[0]
        files.write_atomically(path, lambda handle: _write_png(handle, plot))


def _sample_extension(path: str) -> str:
    extension = os.path.splitext(path)[1].lower()
    if extension not in SAMPLE_EXTENSIONS:
        raise ValueError(
            f"--output={path!r} has an unsupported extension {extension!r}; "
            f"use one of {', '.join(SAMPLE_EXTENSIONS)}"
        )
    return extension


def _nhwc_uint8(images, caller: str) -> np.ndarray:
    pixels = to_uint8(images)
    if pixels.ndim != 4 or pixels.shape[-1] not in (1, 3):
        raise ValueError(
            f"{caller} expects images of shape [N, H, W, C] with C 1 or 3, got {pixels.shape}"
        )
    return pixels


def _tile(pixels: np.ndarray, *, rows: int | None, padding: int) -> np.ndarray:
    count, height, width, channels = pixels.shape
    grid_rows, grid_cols = grid_shape(count, rows)
    grid = np.full(
        (
            1,
            grid_rows * height + (grid_rows + 1) * padding,
            grid_cols * width + (grid_cols + 1) * padding,
            channels,
        ),
        SEPARATOR,
        dtype=np.uint8,
    )
    for index in range(count):
        top = padding + (index // grid_cols) * (height + padding)
        left = padding + (index % grid_cols) * (width + padding)
        grid[0, top : top + height, left : left + width, :] = pixels[index]
    return grid


def _write_png(handle, grid: np.ndarray) -> None:
    """The grid's exact pixels as a PNG of its own channel count: mode "L" for grayscale, "RGB".

    Pillow (matplotlib's image backend) rather than `matplotlib.image.imsave`, which writes
    RGBA always and maps a single channel through a colormap.
    """
    from PIL import Image

    pixels = grid[..., 0] if grid.shape[-1] == 1 else grid
    Image.fromarray(np.ascontiguousarray(pixels)).save(handle, format="PNG")


def _as_points(values, name: str) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 2 or array.shape[1] != 2:
        raise ValueError(f"scatter_plot {name} must have shape (count, 2), got {array.shape}")
    return array


def _limits_around(centres: np.ndarray) -> tuple[float, float, float, float]:
    low, high = centres.min(axis=0), centres.max(axis=0)
    middle = (low + high) / 2.0
    extent = float((high - low).max())
    half = extent / 2.0 + (extent / 4.0 if extent > 0 else 1.0)
    return (middle[0] - half, middle[0] + half, middle[1] - half, middle[1] + half)
