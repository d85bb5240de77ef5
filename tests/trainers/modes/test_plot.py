"""`--mode=plot`: which curves go where, and the PNG drawn from real event files."""

import dataclasses

import matplotlib.image
import numpy as np
import pytest
import tensorflow as tf

from trainers.modes import plot
from trainers.config.flags import Config, ConfigError

TAGS = ["discriminator/loss", "discriminator/real_score", "discriminator/fake_score",
        "discriminator/learning_rate", "discriminator/grad_norm", "discriminator/nonfinite",
        "generator/loss", "generator/learning_rate", "generator/loss_scale",
        "perf/images_per_second", "metrics/fid", "metrics/inception_score", "fid_alone"]


def test_curve_groups_orders_phases_then_other_groups_then_perf():
    groups = plot.curve_groups(TAGS)
    assert list(groups) == ["discriminator", "generator", "metrics", "scalars", "perf"]
    assert groups["discriminator"] == ["discriminator/fake_score", "discriminator/loss",
                                       "discriminator/real_score"]
    assert groups["generator"] == ["generator/loss"]
    assert groups["metrics"] == ["metrics/fid", "metrics/inception_score"]
    assert groups["scalars"] == ["fid_alone"]
    assert groups["perf"] == ["perf/images_per_second"]


def test_a_group_without_loss_keeps_every_tag():
    groups = plot.curve_groups(["metrics/learning_rate", "metrics/grad_norm"])
    assert groups == {"metrics": ["metrics/grad_norm", "metrics/learning_rate"]}


def test_evaluation_metrics_get_a_subplot_each_fractions_one_together():
    """FID (tens) and KID (hundredths) on one axis would flatten KID; the sample count is no
    curve; a nested result (CycleGAN's directions) gets panels per direction."""
    groups = plot.curve_groups([
        "generator/loss", "eval/fid", "eval/kid", "eval/kid_std", "eval/precision", "eval/recall",
        "eval/coverage", "eval/num_samples", "eval/ab/fid", "eval/ab/precision", "perf/images_per_second"])
    assert groups == {
        "generator": ["generator/loss"],
        "eval/ab/fid": ["eval/ab/fid"], "eval/ab: precision": ["eval/ab/precision"],
        "eval/fid": ["eval/fid"], "eval/kid": ["eval/kid", "eval/kid_std"],
        "eval: coverage, precision, recall": ["eval/coverage", "eval/precision", "eval/recall"],
        "perf": ["perf/images_per_second"]}


def test_mode_eval_scalars_are_drawn_beside_the_trainings_not_into_them(tmp_path):
    """LOGDIR/eval/ (what --mode=eval writes) is a run of its own: its points are labelled as
    such, even at a step the training also evaluated with other numbers."""
    for directory, fids in ((tmp_path, {2: 80.0, 4: 60.0}), (tmp_path / "eval", {4: 55.0})):
        writer = tf.summary.create_file_writer(str(directory))
        with writer.as_default():
            for step, fid in fids.items():
                if directory == tmp_path:
                    tf.summary.scalar("generator/loss", 1.0, step=step)
                tf.summary.scalar("eval/fid", fid, step=step)
                tf.summary.scalar("eval/precision", fid / 100, step=step)
                tf.summary.scalar("eval/num_samples", 2000.0, step=step)
        writer.close()
    runs = plot.read_runs(str(tmp_path))
    assert runs[""]["eval/fid"] == [(2, 80.0), (4, 60.0)] and runs["eval"]["eval/fid"] == [(4, 55.0)]
    drawn = plot.plot_curves(str(tmp_path), str(tmp_path / "c.png"))
    assert drawn == {"generator": ["loss"],
                     "eval/fid": ["fid", "fid (--mode=eval)"],
                     "eval: precision": ["precision", "precision (--mode=eval)"]}


def _write_events(logdir, steps):
    writer = tf.summary.create_file_writer(str(logdir))
    with writer.as_default():
        for step in steps:
            for index, tag in enumerate(TAGS[:10]):
                tf.summary.scalar(tag, float(index + step), step=step)
    writer.close()


def test_plot_writes_one_row_per_group(tmp_path):
    _write_events(tmp_path / "run", [2, 4, 6, 4])
    output = tmp_path / "figures" / "curves.png"
    drawn = plot.plot_curves(str(tmp_path / "run"), str(output))
    assert list(drawn) == ["discriminator", "generator", "perf"]
    height, width = matplotlib.image.imread(output).shape[:2]
    assert (height, width) == (3 * plot.ROW_HEIGHT_PX, plot.WIDTH_PX)
    assert sorted(p.name for p in output.parent.iterdir()) == ["curves.png"]


def test_plot_labels_axes_draws_equal_curves_once_and_names_logits(tmp_path):
    """Without a penalty the discriminator's loss is its adversarial term: one curve, not two
    on top of each other; D scores are said to be logits; x is the cycle."""
    writer = tf.summary.create_file_writer(str(tmp_path))
    with writer.as_default():
        for step in (1, 2, 3):
            tf.summary.scalar("discriminator/loss", 1.0 / step, step=step)
            tf.summary.scalar("discriminator/adversarial", 1.0 / step, step=step)
            tf.summary.scalar("discriminator/real_score", 2.0 * step, step=step)
            tf.summary.scalar("generator/loss", 0.5 * step, step=step)
            tf.summary.scalar("generator/adversarial", 0.4 * step, step=step)
            tf.summary.scalar("perf/images_per_second", 100.0, step=step)
    writer.close()
    drawn = plot.plot_curves(str(tmp_path), str(tmp_path / "c.png"))
    assert drawn == {
        "discriminator": ["adversarial = loss", "mean D(real): logit, before the sigmoid"],
        "generator": ["adversarial", "loss"],
        "perf": ["images_per_second"]}


def test_axis_labels_say_what_is_plotted():
    assert plot.y_label("discriminator", ["discriminator/loss", "discriminator/fake_score"]) == \
        "loss; D score (logit)"
    assert plot.y_label("generator", ["generator/loss"]) == "loss"
    assert plot.y_label("eval", ["eval/fid", "eval/kid"]) == "value"
    assert plot.y_label("perf", ["perf/images_per_second"]) == "images / second"


def test_merged_curves_keeps_distinct_curves_apart():
    a, b = np.array([1, 2]), np.array([0.5, 0.25])
    merged = plot.merged_curves({"loss": (a, b), "adversarial": (a, b), "r1": (a, b + 1),
                                 "short": (a[:1], b[:1])})
    assert [label for label, _, _ in merged] == ["loss = adversarial", "r1", "short"]


def test_last_value_per_step_keeps_the_latest_record():
    steps, values = plot._last_value_per_step([(2, 1.0), (4, 2.0), (4, 3.0), (6, 4.0)])
    assert steps.tolist() == [2, 4, 6] and values.tolist() == [1.0, 3.0, 4.0]


def test_default_output_is_curves_png_in_the_logdir(tmp_path):
    _write_events(tmp_path, [1])
    config = Config(mode="plot", logdir=str(tmp_path))
    assert plot.plot(config) == str(tmp_path / "curves.png")
    assert (tmp_path / "curves.png").exists()
    chosen = dataclasses.replace(config, output=str(tmp_path / "mine.png"))
    assert plot.plot_path(chosen) == str(tmp_path / "mine.png")


def test_a_logdir_without_scalars_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="holds no scalar summaries"):
        plot.plot_curves(str(tmp_path), str(tmp_path / "c.png"))
    with pytest.raises(ConfigError, match="is not a directory"):
        plot.plot_curves(str(tmp_path / "missing"), str(tmp_path / "c.png"))
    assert not (tmp_path / "c.png").exists()


def test_per_optimizer_bookkeeping_is_left_out_of_a_phase():
    groups = plot.curve_groups(["simultaneous/loss", "simultaneous/loss_generator",
                                    "simultaneous/grad_norm_generator",
                                    "simultaneous/learning_rate_discriminator",
                                    "simultaneous/loss_scale_generator"])
    assert groups["simultaneous"] == ["simultaneous/loss", "simultaneous/loss_generator"]
