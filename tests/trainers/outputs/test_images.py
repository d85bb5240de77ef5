import os

import numpy as np
import pytest
import tensorflow as tf

from trainers.outputs import images

RED = np.array([214, 39, 40])  # matplotlib's "tab:red", used for the mode markers.


def constant_batch(values, *, size=8, channels=1):
    """Image i is filled with values[i] (broadcast over channels when values[i] is a scalar)."""
    values = np.asarray(values, dtype=np.float32).reshape(len(values), 1, 1, -1)
    return np.broadcast_to(values, (len(values), size, size, channels)).copy()


def ring_modes(count=8, radius=2.0):
    angles = np.arange(count) * 2 * np.pi / count
    return np.stack([radius * np.cos(angles), radius * np.sin(angles)], axis=1)


def red_pixel_count(plot):
    return int((np.abs(plot[0].astype(int) - RED).sum(axis=-1) < 30).sum())


def test_to_uint8_maps_endpoints_midpoint_and_clips():
    x = np.array([-1.0, 1.0, 0.0, -3.0, 7.0, 0.5, -0.5], dtype=np.float32)
    # 0.5 -> floor(1.5 * 127.5 + 0.5) = 191, -0.5 -> floor(0.5 * 127.5 + 0.5) = 64.
    np.testing.assert_array_equal(images.to_uint8(x), [0, 255, 128, 0, 255, 191, 64])
    assert images.to_uint8(x).dtype == np.uint8


def test_to_uint8_accepts_tensors_and_keeps_shape():
    out = images.to_uint8(tf.fill([2, 3, 4, 1], 1.0))
    assert out.shape == (2, 3, 4, 1)
    assert out.dtype == np.uint8
    assert np.all(out == 255)


def test_to_uint8_rejects_nan_and_integer_pixels():
    with pytest.raises(ValueError, match="1 NaN"):
        images.to_uint8(np.array([0.0, np.nan]))
    with pytest.raises(ValueError, match="uint8"):
        images.to_uint8(np.zeros((1, 2, 2, 1), np.uint8))


@pytest.mark.parametrize(
    "count, rows, expected",
    [
        (1, None, (1, 1)),
        (2, None, (1, 2)),
        (3, None, (2, 2)),
        (5, None, (2, 3)),
        (10, None, (3, 4)),
        (16, None, (4, 4)),
        (17, None, (4, 5)),
        (64, None, (8, 8)),
        (10, 2, (2, 5)),
        (16, 3, (3, 6)),
        (7, 1, (1, 7)),
        (3, 5, (5, 1)),
    ],
)
def test_grid_shape(count, rows, expected):
    assert images.grid_shape(count, rows) == expected


@pytest.mark.parametrize("count, rows", [(0, None), (-1, None), (4, 0), (4, -2)])
def test_grid_shape_rejects_non_positive(count, rows):
    with pytest.raises(ValueError, match=">= 1"):
        images.grid_shape(count, rows)


def test_image_grid_shape_includes_outer_border():
    grid = images.image_grid(np.zeros((16, 8, 8, 1), np.float32), padding=1)
    # 4 cells of 8 plus 5 padding lines: 3 between cells and 2 on the outer border.
    assert grid.shape == (1, 4 * 8 + 5, 4 * 8 + 5, 1)
    assert grid.dtype == np.uint8


def test_image_grid_places_cells_row_major_with_gray_separators():
    values = np.linspace(-0.9, 1.0, 16, dtype=np.float32)
    grid = images.image_grid(constant_batch(values), padding=1)[0, ..., 0]
    expected = images.to_uint8(values)
    for index in range(16):
        row, col = divmod(index, 4)
        top, left = 1 + row * 9, 1 + col * 9
        np.testing.assert_array_equal(grid[top : top + 8, left : left + 8], expected[index])
    lines = [0, 9, 18, 27, 36]
    assert np.all(grid[lines, :] == images.SEPARATOR)
    assert np.all(grid[:, lines] == images.SEPARATOR)


def test_separators_stay_visible_between_black_samples():
    """Fashion-MNIST samples have black backgrounds: black lines between them would vanish."""
    grid = images.image_grid(-np.ones((4, 5, 5, 1), np.float32), padding=1)[0, ..., 0]
    assert images.SEPARATOR == 128
    assert np.all(grid[[0, 6, 12], :] == 128) and np.all(grid[:, [0, 6, 12]] == 128)
    assert (grid == 0).sum() == 4 * 25


def test_image_grid_leaves_missing_cells_gray_and_honours_rows():
    grid = images.image_grid(constant_batch([1.0] * 5, size=4), padding=2)[0, ..., 0]
    # 5 images -> 2 x 3 grid; the last cell (row 1, col 2) is empty.
    assert grid.shape == (2 * 4 + 3 * 2, 3 * 4 + 4 * 2)
    assert np.all(grid[2 + 6 : 2 + 6 + 4, 2 + 2 * 6 : 2 + 2 * 6 + 4] == images.SEPARATOR)
    assert (grid == 255).sum() == 5 * 16
    assert (grid == images.SEPARATOR).sum() == grid.size - 5 * 16

    single_row = images.image_grid(constant_batch([1.0] * 5, size=4), rows=1, padding=0)
    assert single_row.shape == (1, 4, 20, 1)
    assert np.all(single_row == 255)


def test_image_grid_keeps_rgb_channels():
    colours = [[1.0, -1.0, -1.0], [-1.0, 1.0, -1.0], [-1.0, -1.0, 1.0], [0.0, 0.0, 0.0]]
    grid = images.image_grid(constant_batch(colours, size=3, channels=3))
    assert grid.shape == (1, 2 * 3 + 3, 2 * 3 + 3, 3)
    centres = [grid[0, 2, 2], grid[0, 2, 6], grid[0, 6, 2], grid[0, 6, 6]]
    np.testing.assert_array_equal(centres, [[255, 0, 0], [0, 255, 0], [0, 0, 255], [128] * 3])


@pytest.mark.parametrize(
    "batch, kwargs, message",
    [
        (np.zeros((2, 4, 4, 2), np.float32), {}, "C 1 or 3"),
        (np.zeros((4, 4, 1), np.float32), {}, "N, H, W, C"),
        (np.zeros((2, 4, 4, 1), np.float32), {"padding": -1}, "padding >= 0"),
    ],
)
def test_image_grid_rejects_bad_arguments(batch, kwargs, message):
    with pytest.raises(ValueError, match=message):
        images.image_grid(batch, **kwargs)


def test_scatter_plot_returns_rgb_uint8_with_content():
    rng = np.random.default_rng(0)
    modes = ring_modes()
    points = modes[rng.integers(0, 8, 300)] + 0.05 * rng.standard_normal((300, 2))
    plot = images.scatter_plot(points, modes=modes, title="ring", size_px=200)
    assert plot.shape == (1, 200, 200, 3)
    assert plot.dtype == np.uint8
    assert len(np.unique(plot.reshape(-1, 3), axis=0)) > 10
    assert red_pixel_count(plot) > 0
    assert red_pixel_count(images.scatter_plot(points, size_px=200)) == 0


def test_scatter_plot_limits_come_from_modes_not_points():
    modes = ring_modes()
    far_a = images.scatter_plot([[50.0, 50.0]], modes=modes, size_px=160)
    far_b = images.scatter_plot([[-90.0, 30.0]], modes=modes, size_px=160)
    # Both samples fall outside the window fixed by the modes, so the frames are identical.
    np.testing.assert_array_equal(far_a, far_b)
    explicit = images.scatter_plot([[50.0, 50.0]], limits=(-3, 3, -3, 3), size_px=160)
    assert red_pixel_count(explicit) == 0


def test_scatter_plot_rejects_bad_points():
    with pytest.raises(ValueError, match=r"points must have shape \(count, 2\)"):
        images.scatter_plot(np.zeros((5, 3)))
    with pytest.raises(ValueError, match="limits"):
        images.scatter_plot(np.zeros((5, 2)), limits=(0, 1))


def test_save_samples_npy_is_exact_uint8(tmp_path):
    batch = np.random.default_rng(1).uniform(-1.2, 1.2, (6, 5, 5, 3)).astype(np.float32)
    path = tmp_path / "new" / "dir" / "samples.npy"
    images.save_samples(batch, str(path))
    loaded = np.load(path)
    assert loaded.dtype == np.uint8
    np.testing.assert_array_equal(loaded, images.to_uint8(batch))
    assert os.listdir(path.parent) == ["samples.npy"]


@pytest.mark.parametrize("channels, mode", [(1, "L"), (3, "RGB")])
def test_save_samples_png_reads_back_as_the_grid(tmp_path, channels, mode):
    """Grayscale samples are a one-channel grayscale PNG, colour ones RGB, pixel for pixel."""
    from PIL import Image

    batch = np.random.default_rng(2).uniform(-1, 1, (16, 8, 8, channels)).astype(np.float32)
    path = tmp_path / "samples.png"
    images.save_samples(batch, str(path))
    with Image.open(path) as png:
        assert png.mode == mode
        pixels = np.asarray(png)
    grid = images.image_grid(batch)[0]
    assert grid.shape[:2] == (37, 37)
    np.testing.assert_array_equal(pixels, grid[..., 0] if channels == 1 else grid)
    assert os.listdir(tmp_path) == ["samples.png"]


def test_save_samples_rejects_unknown_extension(tmp_path):
    path = tmp_path / "samples.jpg"
    with pytest.raises(ValueError, match=r"--output=.*samples\.jpg.*\.npy, \.png"):
        images.save_samples(np.zeros((1, 4, 4, 1), np.float32), str(path))
    assert not path.exists()


def test_save_samples_failure_keeps_previous_file_and_leaves_no_temporary(tmp_path, monkeypatch):
    path = tmp_path / "samples.png"
    path.write_bytes(b"previous")

    def crash(handle, grid):
        handle.write(b"half")
        raise RuntimeError("disk full")

    monkeypatch.setattr(images, "_write_png", crash)
    with pytest.raises(RuntimeError, match="disk full"):
        images.save_samples(np.zeros((4, 4, 4, 1), np.float32), str(path))
    assert path.read_bytes() == b"previous"
    assert os.listdir(tmp_path) == ["samples.png"]
