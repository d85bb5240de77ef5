"""`--mode=plot`: a run's training curves from its event files, as one PNG for a report.

One subplot per group of scalar tags, a group being the tag's first path component: every
phase ("discriminator", "generator": the groups with a `loss` tag) shows its losses and scores,
without the optimizer bookkeeping TensorBoard already shows (learning rate, gradient norm,
skipped updates, loss scale); any other group (e.g. evaluation metrics) shows all its tags;
"perf" (images/second) comes last. A step written twice (a resumed run repeating work) keeps
its last value. Curves of one subplot that coincide (a discriminator's `loss` and its
`adversarial` term when no penalty is added) are drawn once, labelled with both names. The x
axis is the cycle; the y axis says what is plotted, and the discriminator's mean scores on
real and fake inputs are labelled as logits: its raw output, before any sigmoid.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

import numpy as np

from datasets import files
from trainers.outputs import summaries
from trainers.config.fields import Config, ConfigError

DEFAULT_PLOT_FILE = "curves.png"
BOOKKEEPING_KEYS = ("learning_rate", "grad_norm", "nonfinite", "loss_scale")
LAST_GROUP = "perf"
# The adversarial phases' mean discriminator outputs, named for the legend.
SCORE_LABELS = {"real_score": "mean D(real): logit, before the sigmoid",
                "fake_score": "mean D(fake): logit, before the sigmoid"}
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
    return {name: groups[name] for name in order}


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
    groups = curve_groups(summaries.read_event_tags(logdir)["scalars"])
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
        curves = merged_curves({curve_label(tag): _last_value_per_step(
            summaries.read_scalars(logdir, tag)) for tag in tags})
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
