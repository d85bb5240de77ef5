"""The tables and the figure of `quality.py`: the final table, the per-mark tables and the
metrics-against-minutes PNG.

Pure functions over the result dicts `quality.py` builds (and writes to its JSON file): per row
label, its final record (steps, images_per_second, the metrics) with a `timeline`, one entry per
wall-time mark: {"minutes", "seconds" (the scored state's age, from the row's launch), "steps",
and the metrics}, or {"minutes"} alone when the row saved no state by that mark.
"""

from __future__ import annotations

import math

from datasets import files

COLUMNS = ("fid", "kid", "precision", "recall", "coverage", "class_kl", "class_accuracy")
# The per-mark tables and the figure's panels: (key, title), FID on a log axis.
TIMELINE_METRICS = (("fid", "FID"), ("precision", "precision"), ("recall", "recall"))


def align(lines: list[list[str]]) -> str:
    """Rows of cells as right-aligned columns."""
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    return "\n".join("  ".join(cell.rjust(width) for cell, width in zip(line, widths))
                     for line in lines)


def format_table(results: dict) -> str:
    """The final table: steps, images/second and every metric of each row's final state."""
    lines = [["row", "steps", "img/s", *COLUMNS]]
    for label, record in results.items():
        cells = [label, str(record["steps"]), f"{record['images_per_second']:.0f}"]
        cells += [f"{record[key]:.4f}" if key in ("kid",) and key in record else
                  f"{record[key]:.3f}" if key in record else "-" for key in COLUMNS]
        lines.append(cells)
    return align(lines)


def format_timeline(results: dict) -> str:
    """One table per TIMELINE_METRICS entry: a line per row, a column per mark (minutes)."""
    marks = [entry["minutes"] for entry in next(iter(results.values()))["timeline"]]
    tables = []
    for key, title in TIMELINE_METRICS:
        lines = [[title, *(f"{minutes:g} min" for minutes in marks)]]
        for label, record in results.items():
            lines.append([label, *(f"{entry[key]:.3f}" if key in entry else "-"
                                   for entry in record["timeline"])])
        tables.append(align(lines))
    return "\n\n".join(tables)


def fid_ticks(low: float, high: float) -> list[float]:
    """The labelled values of FID's log axis from `low` to `high`: the 1-2-5 ladder across
    decades (10, 20, 50, 100, ...), or, on a range too narrow to hold three of those (a long
    run between 10 and 19), evenly spaced round values, so no panel shows a single label."""
    from matplotlib.ticker import MaxNLocator

    decades = range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1)
    ladder = [round(factor * 10.0 ** decade, 9) for decade in decades for factor in (1, 2, 5)]
    inside = [value for value in ladder if low <= value <= high]
    if len(inside) >= 3:
        return inside
    return [round(float(value), 9) for value in MaxNLocator(nbins=5).tick_values(low, high)
            if low <= value <= high]


def plot_timeline(results: dict, path: str, *, title: str) -> dict[str, list[str]]:
    """Draws TIMELINE_METRICS against minutes, one panel each side by side, one line per row,
    into the PNG `path` (written atomically). Returns {panel title: the rows drawn in it}."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

    figure = Figure(figsize=(15, 4.6), dpi=100)
    FigureCanvasAgg(figure)
    drawn: dict[str, list[str]] = {}
    for index, (key, name) in enumerate(TIMELINE_METRICS):
        axes = figure.add_subplot(1, len(TIMELINE_METRICS), index + 1)
        drawn[name] = []
        for label, record in results.items():
            points = [(entry["minutes"], entry[key]) for entry in record["timeline"]
                      if key in entry and math.isfinite(entry[key])]
            if points:
                axes.plot(*zip(*points), marker="o", linewidth=2, label=label)
                drawn[name].append(label)
        if key == "fid":
            axes.set_yscale("log")
            axes.yaxis.set_major_locator(FixedLocator(fid_ticks(*axes.get_ylim())))
            axes.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
            axes.yaxis.set_minor_formatter(NullFormatter())
        else:
            axes.set_ylim(-0.02, 1.02)  # a value of 0 or 1 stays visible
        axes.set_title(f"{name} (lower is better)" if key == "fid" else f"{name} (higher is better)")
        axes.set_xlabel("minutes of wall clock since launch")
        axes.set_xlim(left=0)
        axes.grid(alpha=0.3, which="both")
    figure.axes[0].legend(loc="best")
    figure.suptitle(title)
    figure.tight_layout()
    files.write_atomically(path, lambda handle: figure.savefig(handle, format="png"))
    return drawn
