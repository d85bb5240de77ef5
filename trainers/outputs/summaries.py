"""TensorBoard output: thin writers over `tf.summary`, and readers that tests use to check runs.

Writers follow `tf.summary`'s own contract: they write to the DEFAULT writer the caller set with
`with writer.as_default():` (and honour `tf.summary.record_if`), and are silent no-ops when none
is set. That is deliberate: replicas or processes that should not log simply run without a
writer, and this module keeps no state of its own. The caller owns the writer's lifetime and
must `flush()` or `close()` it before reading the files back.

Tags are used as given, so "discriminator/loss" lands in TensorBoard's "discriminator" section.
The image and scatter writers render with NumPy/matplotlib and therefore run eagerly only.

The readers classify values by their summary-metadata plugin name ("scalars", "images",
"histograms", "text"), which is what TF2 `tf.summary` records; TF1-style `simple_value`
summaries are not recognised.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import tensorflow as tf

from trainers.outputs import images as image_utils

TAG_KINDS = ("scalars", "images", "histograms", "text")


def write_scalars(scalars: Mapping[str, float | tf.Tensor], *, step: int) -> None:
    """One `tf.summary.scalar` per entry, tag = key."""
    for tag, value in scalars.items():
        tf.summary.scalar(tag, value, step=step)


def write_histograms(named_tensors: Mapping[str, tf.Tensor | list], *, step: int) -> None:
    """One `tf.summary.histogram` per entry; a list (e.g. a model's gradients) is one histogram.

    List elements are flattened and concatenated as float32 (mixed-precision models mix dtypes).
    None values, and None elements of lists, are skipped: that is how `tape.gradient` reports
    variables the loss does not touch, which is not an error worth stopping a run for.
    """
    for tag, value in named_tensors.items():
        if value is None:
            continue
        if isinstance(value, (list, tuple)):
            parts = [
                tf.reshape(tf.cast(part, tf.float32), [-1]) for part in value if part is not None
            ]
            if not parts:
                continue
            value = tf.concat(parts, axis=0)
        tf.summary.histogram(tag, value, step=step)


def write_image_grid(tag: str, images, *, step: int, rows: int | None = None) -> None:
    """Writes a batch [N, H, W, C] in [-1, 1] as one tiled image (see `images.image_grid`)."""
    tf.summary.image(tag, image_utils.image_grid(images, rows=rows), step=step, max_outputs=1)


def write_scatter(tag: str, points, *, step: int, modes=None) -> None:
    """Writes 2-D samples over the true mode centres as an image (see `images.scatter_plot`).

    The step is printed in the title so frames stay identifiable once downloaded from TensorBoard.
    """
    plot = image_utils.scatter_plot(points, modes=modes, title=f"{tag} @ step {int(step)}")
    tf.summary.image(tag, plot, step=step, max_outputs=1)


def write_config(config: Mapping[str, object], *, step: int = 0) -> None:
    """Writes the run's flags as one text summary, tag "config": a markdown table sorted by flag.

    TensorBoard renders text summaries as markdown, so "|" in values is escaped and newlines are
    flattened to keep each flag on one row.
    """
    rows = ["| flag | value |", "| --- | --- |"]
    for key in sorted(config):
        rows.append(f"| {_markdown_cell(key)} | {_markdown_cell(config[key])} |")
    tf.summary.text("config", "\n".join(rows), step=step)


def read_event_tags(logdir: str) -> dict[str, set[str]]:
    """Tags written under `logdir` (all event files, recursively), grouped by plugin name.

    The result always has the keys "scalars", "images", "histograms" and "text"; tags written by
    any other plugin appear under that plugin's name. Runs in subdirectories are merged.
    """
    tags: dict[str, set[str]] = {kind: set() for kind in TAG_KINDS}
    for _, value in summary_values(logdir):
        plugin = value.metadata.plugin_data.plugin_name
        if plugin:
            tags.setdefault(plugin, set()).add(value.tag)
    return tags


def read_scalars(logdir: str, tag: str) -> list[tuple[int, float]]:
    """(step, value) pairs of scalar `tag` under `logdir`, sorted by step.

    Every record is kept: a step written twice (e.g. a resumed run repeating work) appears twice,
    in file order, so tests can detect it. Raises ValueError, listing the scalar tags that do
    exist, when `tag` was never written.
    """
    scalars = scalar_records(logdir)
    if tag not in scalars:
        raise ValueError(f"no scalar {tag!r} under {logdir!r}; scalar tags found: {sorted(scalars)}")
    return sorted(scalars[tag], key=lambda point: point[0])


def scalar_records(logdir: str, *, recursive: bool = True) -> dict[str, list[tuple[int, float]]]:
    """{scalar tag: (step, value) records in file order} under `logdir` (`summary_values`:
    only the run in `logdir` itself when not `recursive`)."""
    scalars: dict[str, list[tuple[int, float]]] = {}
    for step, value in summary_values(logdir, recursive=recursive):
        if value.metadata.plugin_data.plugin_name == "scalars":
            scalars.setdefault(value.tag, []).append((step, float(tf.make_ndarray(value.tensor))))
    return scalars


def summary_values(logdir: str, *,
                   recursive: bool = True) -> Iterator[tuple[int, tf.compat.v1.Summary.Value]]:
    """(step, summary value) for every value of every event file under logdir (only those in
    logdir itself, one TensorBoard run, when not `recursive`), in path order."""
    if not tf.io.gfile.isdir(logdir):
        raise ValueError(f"logdir {logdir!r} is not a directory; pass the writer's log directory")
    walked = tf.io.gfile.walk(logdir) if recursive else [(logdir, None, tf.io.gfile.listdir(logdir))]
    event_files = sorted(
        tf.io.gfile.join(directory, name)
        for directory, _, names in walked
        for name in names
        if "tfevents" in name
    )
    for path in event_files:
        for record in tf.data.TFRecordDataset(path):
            event = tf.compat.v1.Event.FromString(record.numpy())
            for value in event.summary.value:
                yield int(event.step), value


def _markdown_cell(value: object) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")
