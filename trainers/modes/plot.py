"""`--mode=plot`: a run's training curves from its event files, as one PNG for a report.

One subplot per group of scalar tags, a group being the tag's first path component: every
phase ("discriminator", "generator": the groups with a `loss` tag) shows its losses and scores,
without the optimizer bookkeeping TensorBoard already shows (learning rate, gradient norm,
skipped updates, loss scale); evaluation metrics ("eval", `evaluation.tags`) get one subplot
per metric, because their scales differ by orders of magnitude (FID in the tens, KID in the
hundredths), with a metric's `_std` beside it and the fractions (precision, recall, coverage,
class accuracy) sharing one, and the sample count left out; any other group shows all its
tags; "perf" (images/second) comes last. Every directory of event files under LOGDIR is a
TensorBoard run of its own: LOGDIR's (the training's) curves keep their names, another's are
labelled with it, e.g. "fid (--mode=eval)" for what `--mode=eval` wrote into LOGDIR/eval/, so
an evaluation after training is drawn beside the training's, never merged into it. A step
written twice in one run (a resumed run repeating work) keeps its last value. Curves of one
subplot that coincide (a discriminator's `loss` and its `adversarial` term when no penalty is
added) are drawn once, labelled with both names. The x axis is the cycle; the y axis says what
is plotted, and the discriminator's mean scores on real and fake inputs are labelled as
logits: its raw output, before any sigmoid.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

import numpy as np

from datasets import files
from trainers.config.flags import Config, ConfigError
from trainers.evaluation import tags as eval_tags
from trainers.outputs import summaries

DEFAULT_PLOT_FILE = "curves.png"
BOOKKEEPING_KEYS = ("learning_rate", "grad_norm", "nonfinite", "loss_scale")
LAST_GROUP = "perf"
# The adversarial phases' mean discriminator outputs, named for the legend.
SCORE_LABELS = {"real_score": "mean D(real): logit, before the sigmoid",
                "fake_score": "mean D(fake): logit, before the sigmoid"}
# Evaluation scalars that are no curve: the sample counts an evaluation used.
EVAL_BOOKKEEPING = ("num_samples", "mode_samples")
# Evaluation metrics in [0, 1], drawn together.
FRACTION_METRICS = ("precision", "recall", "coverage", "class_accuracy", "high_quality")
STD_SUFFIX = "_std"
# How the runs other than LOGDIR's own are named in legends (else: their path under LOGDIR).
RUN_LABELS = {eval_tags.EVAL_MODE_RUN: "--mode=eval"}
WIDTH_PX = 800
ROW_HEIGHT_PX = 300


def curve_groups(tags: Iterable[str]) -> dict[str, list[str]]:
    """Scalar tags -> {subplot title: sorted tags in it}, in drawing order (see module doc).

    Phases first, then other groups, each alphabetically, then "perf"; a tag without "/" goes
    to the group "scalars".
    """
    groups: dict[str, list[str]] = {}
    for tag in sorted(set(tags)):
        group = tag.split("/", 1)[0] if "/" in tag else "scalars"
        groups.setdefault(group, []).append(tag)
    phases = {name for name, members in groups.items() if f"{name}/loss" in members}
    for name in phases:
        # Bookkeeping keys also come per optimizer: "grad_norm_generator", "loss_scale_discriminator".
        groups[name] = [tag for tag in groups[name]
                        if not tag.rsplit("/", 1)[1].startswith(BOOKKEEPING_KEYS)]
    order = sorted(groups, key=lambda name: (name == LAST_GROUP, name not in phases, name))
    ordered: dict[str, list[str]] = {}
    for name in order:
        ordered.update(metric_panels(groups[name]) if name == eval_tags.PREFIX
                       else {name: groups[name]})
    return ordered


def metric_panels(tags: list[str]) -> dict[str, list[str]]:
    """The subplots of the evaluation tags (sorted): {title: tags}, one per metric and features
    ("eval/fid_domain"), `_std` companions with their metric, the FRACTION_METRICS of one
    prefix together ("eval/ab: coverage_domain, precision_domain"),
    EVAL_BOOKKEEPING left out."""
    panels: dict[tuple[str, str], list[str]] = {}
    for tag in tags:
        prefix, key = tag.rsplit("/", 1)
        if key not in EVAL_BOOKKEEPING:
            metric, features = eval_tags.split_features(key)
            metric = metric.removesuffix(STD_SUFFIX)
            if metric in FRACTION_METRICS:
                metric = ""  # one panel per prefix
            elif features:
                metric = eval_tags.feature_key(metric, features)
            panels.setdefault((prefix, metric), []).append(tag)
    return {(f"{prefix}/{metric}" if metric else
             f"{prefix}: " + ", ".join(tag.rsplit("/", 1)[1] for tag in members)): members
            for (prefix, metric), members in sorted(panels.items())}


def merged_curves(series: dict[str, tuple[np.ndarray, np.ndarray]]) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """{legend name: (steps, values)} -> [(label, steps, values)], one entry per distinct curve.

    Curves with equal steps and values are one entry labelled "a = b" (in the given order), so
    a quantity logged under two names is not drawn twice on top of itself.
    """
    merged: list[tuple[list[str], np.ndarray, np.ndarray]] = []
    for name, (steps, values) in series.items():
        same = next((entry for entry in merged if np.array_equal(entry[1], steps)
                     and np.array_equal(entry[2], values)), None)
        if same is None:
            merged.append(([name], steps, values))
        else:
            same[0].append(name)
    return [(" = ".join(names), steps, values) for names, steps, values in merged]


def curve_label(tag: str) -> str:
    """The legend name of scalar `tag`: its name within the group; D scores say they are logits."""
    key = tag.split("/", 1)[-1]
    return SCORE_LABELS.get(key, key)


def y_label(group: str, tags: list[str]) -> str:
    """What a subplot's y axis shows: images/second, losses (and D's logits), or metric values."""
    if group == LAST_GROUP:
        return "images / second"
    keys = {tag.split("/", 1)[-1] for tag in tags}
    if f"{group}/loss" not in tags:
        return "value"
    return "loss; D score (logit)" if keys & set(SCORE_LABELS) else "loss"


def plot_curves(logdir: str, output: str) -> dict[str, list[str]]:
    """Draws the scalars under `logdir` into the PNG `output` (written atomically).

    The image is WIDTH_PX wide and ROW_HEIGHT_PX high per subplot. Returns what was drawn:
    {subplot title: the legend's labels, one per curve}. ConfigError when `logdir` holds no
    scalar summaries.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    if not os.path.isdir(logdir):
        raise ConfigError(f"--logdir={logdir!r} is not a directory; point it at a training run.")
    runs = read_runs(logdir)
    groups = curve_groups(tag for scalars in runs.values() for tag in scalars)
    if not groups:
        raise ConfigError(
            f"--logdir={logdir!r} holds no scalar summaries (no event files with losses); train "
            "first, or point --logdir at a run directory.")
    dpi = 100
    figure = Figure(figsize=(WIDTH_PX / dpi, ROW_HEIGHT_PX * len(groups) / dpi), dpi=dpi)
    FigureCanvasAgg(figure)
    drawn: dict[str, list[str]] = {}
    for index, (title, tags) in enumerate(groups.items()):
        axes = figure.add_subplot(len(groups), 1, index + 1)
        curves = merged_curves({run_label(curve_label(tag), run): _last_value_per_step(scalars[tag])
                                for run, scalars in runs.items() for tag in tags if tag in scalars})
        for label, steps, values in curves:
            axes.plot(steps, values, marker="." if len(steps) <= 50 else None, label=label)
        axes.set_title(title)
        axes.set_xlabel("cycle")
        axes.set_ylabel(y_label(title, tags), fontsize="small")
        axes.grid(alpha=0.3)
        axes.legend(loc="best", fontsize="small")
        drawn[title] = [label for label, _, _ in curves]
    figure.tight_layout()
    files.write_atomically(output, lambda handle: figure.savefig(handle, format="png", dpi=dpi))
    return drawn


def read_runs(logdir: str) -> dict[str, dict[str, list[tuple[int, float]]]]:
    """{run: {scalar tag: (step, value) records in file order}} for every directory under
    `logdir` holding event files, named by its path under `logdir` ("" for `logdir` itself)."""
    import tensorflow as tf

    runs: dict[str, dict[str, list[tuple[int, float]]]] = {}
    for directory, _, _ in sorted(tf.io.gfile.walk(logdir)):
        scalars = summaries.scalar_records(directory, recursive=False)
        if scalars:
            run = os.path.relpath(directory, logdir).replace(os.sep, "/")
            runs["" if run == "." else run] = scalars
    return runs


def run_label(label: str, run: str) -> str:
    """A curve's legend name: `label` for LOGDIR's own run, else followed by the run's name."""
    return f"{label} ({RUN_LABELS.get(run, run)})" if run else label


def plot_path(config: Config) -> str:
    """`--output`, or LOGDIR/curves.png when `--output` is left at its default."""
    if config.output == Config.output:
        return os.path.join(config.logdir, DEFAULT_PLOT_FILE)
    return config.output


def plot(config: Config) -> str:
    """`--mode=plot`: draws the curves of `config.logdir`; returns the PNG's path."""
    path = plot_path(config)
    plot_curves(config.logdir, path)
    return path


def _last_value_per_step(points: list[tuple[int, float]]) -> tuple[np.ndarray, np.ndarray]:
    last = dict(points)
    steps = np.array(sorted(last))
    return steps, np.array([last[step] for step in steps])
