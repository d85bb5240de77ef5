import numpy as np
import pytest
import tensorflow as tf

from trainers.outputs import summaries


def write(logdir, body):
    writer = tf.summary.create_file_writer(str(logdir))
    with writer.as_default():
        body()
    writer.close()


def tensors_for(logdir, tag):
    """Every (step, tensor ndarray) written for `tag`, read with TF's own iterator."""
    found = []
    for path in tf.io.gfile.glob(str(logdir / "*tfevents*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                if value.tag == tag:
                    found.append((event.step, tf.make_ndarray(value.tensor)))
    return found


def test_all_writers_are_found_by_read_event_tags(tmp_path):
    def body():
        scalars = {"discriminator/loss": 0.5, "generator/loss": tf.constant(1.0)}
        summaries.write_scalars(scalars, step=1)
        summaries.write_histograms({"generator/gradients": [tf.ones([2, 2])]}, step=1)
        summaries.write_image_grid("samples", np.zeros((4, 8, 8, 1), np.float32), step=1)
        summaries.write_scatter("toy", np.zeros((10, 2)), step=1, modes=np.ones((2, 2)))
        summaries.write_config({"batch_size": 64})

    write(tmp_path, body)
    assert summaries.read_event_tags(str(tmp_path)) == {
        "scalars": {"discriminator/loss", "generator/loss"},
        "images": {"samples", "toy"},
        "histograms": {"generator/gradients"},
        "text": {"config"},
    }


def test_read_scalars_returns_steps_and_values_sorted_by_step(tmp_path):
    def body():
        for step, value in [(2, 0.25), (0, 1.5), (1, tf.constant(-3.0))]:
            summaries.write_scalars({"d/loss": value, "g/loss": 10.0 * step}, step=step)

    write(tmp_path, body)
    assert summaries.read_scalars(str(tmp_path), "d/loss") == [(0, 1.5), (1, -3.0), (2, 0.25)]
    assert summaries.read_scalars(str(tmp_path), "g/loss") == [(0, 0.0), (1, 10.0), (2, 20.0)]


def test_read_scalars_keeps_repeated_steps(tmp_path):
    write(tmp_path, lambda: [summaries.write_scalars({"loss": v}, step=5) for v in (1.0, 2.0)])
    assert summaries.read_scalars(str(tmp_path), "loss") == [(5, 1.0), (5, 2.0)]


def test_read_scalars_names_the_tags_that_exist(tmp_path):
    write(tmp_path, lambda: summaries.write_scalars({"d/loss": 1.0}, step=0))
    with pytest.raises(ValueError, match=r"no scalar 'g/loss'.*\['d/loss'\]"):
        summaries.read_scalars(str(tmp_path), "g/loss")


def test_readers_walk_subdirectories_and_reject_missing_logdir(tmp_path):
    write(tmp_path / "train", lambda: summaries.write_scalars({"loss": 1.0}, step=1))
    write(tmp_path / "eval" / "fid", lambda: summaries.write_scalars({"fid": 30.0}, step=1))
    assert summaries.read_event_tags(str(tmp_path))["scalars"] == {"loss", "fid"}
    assert summaries.read_scalars(str(tmp_path), "fid") == [(1, 30.0)]
    with pytest.raises(ValueError, match="is not a directory"):
        summaries.read_event_tags(str(tmp_path / "missing"))


def test_write_histograms_concatenates_lists_and_skips_none(tmp_path):
    def body():
        summaries.write_histograms(
            {
                "grads": [tf.ones([2, 2]), None, tf.zeros([3], tf.bfloat16)],
                "single": tf.range(5, dtype=tf.float32),
                "untouched": None,
                "all_none": [None, None],
            },
            step=3,
        )

    write(tmp_path, body)
    assert summaries.read_event_tags(str(tmp_path))["histograms"] == {"grads", "single"}
    [(step, buckets)] = tensors_for(tmp_path, "grads")
    assert step == 3
    # Buckets are rows of (left edge, right edge, count): all 4 + 3 elements are counted.
    assert buckets[:, 2].sum() == 7
    assert buckets[0, 0] == 0.0 and buckets[-1, 1] == 1.0


def test_write_image_grid_writes_one_tiled_png(tmp_path):
    batch = np.zeros((6, 8, 8, 1), np.float32)
    write(tmp_path, lambda: summaries.write_image_grid("samples", batch, step=4, rows=2))
    [(step, encoded)] = tensors_for(tmp_path, "samples")
    assert step == 4
    # Image summaries store [width, height, png...]; 2 x 3 cells of 8 with padding 1.
    width, height, png = encoded
    assert (int(width), int(height)) == (3 * 8 + 4, 2 * 8 + 3)
    assert tf.io.decode_png(png).shape == (19, 28, 1)


def test_write_scatter_writes_an_rgb_plot(tmp_path):
    points = np.random.default_rng(0).standard_normal((50, 2))
    write(tmp_path, lambda: summaries.write_scatter("toy", points, step=7, modes=np.zeros((1, 2))))
    [(step, (_, _, png))] = tensors_for(tmp_path, "toy")
    assert step == 7
    assert tf.io.decode_png(png).shape == (400, 400, 3)


def test_write_config_is_a_sorted_escaped_markdown_table(tmp_path):
    config = {"lr": 0.0002, "dataset": "fashion_mnist", "note": "a|b\nc"}
    write(tmp_path, lambda: summaries.write_config(config))
    [(step, text)] = tensors_for(tmp_path, "config")
    assert step == 0
    assert text.item().decode() == (
        "| flag | value |\n"
        "| --- | --- |\n"
        "| dataset | fashion_mnist |\n"
        "| lr | 0.0002 |\n"
        "| note | a\\|b c |"
    )

