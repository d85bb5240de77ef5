"""`--mode=plot`: a run's training curves from its event files, as one PNG for a report.

One subplot per group of scalar tags, a group being the tag's first path component: every
phase ("discriminator", "generator": the groups with a `loss` tag) shows its losses and scores,
without the optimizer bookkeeping TensorBoard already shows (learning rate, gradient norm,
skipped updates, loss scale); any other group (e.g. evaluation metrics) shows all its tags;
"perf" (images/second) comes last. A step written twice (a resumed run repeating work) keeps
its last value.
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


def plot_curves(logdir: str, output: str) -> dict[str, list[str]]:
    """Draws the scalars under `logdir` into the PNG `output` (written atomically).

    The image is WIDTH_PX wide and ROW_HEIGHT_PX high per subplot. Returns what was drawn, as
    `curve_groups` returns it. ConfigError when `logdir` holds no scalar summaries.
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
    for index, (title, tags) in enumerate(groups.items()):
        axes = figure.add_subplot(len(groups), 1, index + 1)
        for tag in tags:
            steps, values = _last_value_per_step(summaries.read_scalars(logdir, tag))
            axes.plot(steps, values, marker="." if len(steps) <= 50 else None,
                      label=tag.split("/", 1)[-1])
        axes.set_title(title)
        axes.set_xlabel("step")
        axes.grid(alpha=0.3)
        axes.legend(loc="best", fontsize="small")
    figure.tight_layout()
    files.write_atomically(output, lambda handle: figure.savefig(handle, format="png", dpi=dpi))
    return groups


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
