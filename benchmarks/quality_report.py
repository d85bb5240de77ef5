"""The tables and the figure of `quality.py`: the final table, the per-mark tables and the
metrics-against-minutes PNG.

Pure functions over the result dicts `quality.py` builds (and writes to its JSON file): per row
label, its final record (steps, images_per_second, the metrics) with a `timeline`, one entry per
wall-time mark: {"minutes", "seconds" (the scored state's age, from the row's launch), "steps",
and the metrics}, or {"minutes"} alone when the row saved no state by that mark.
"""

from __future__ import annotations

import math
import statistics

from datasets import files

COLUMNS = ("fid", "kid", "precision", "recall", "coverage", "class_kl", "class_accuracy", "modes",
           "modes_kl")
FORMATS = {"kid": ".4f", "modes": ".0f"}  # the others: ".3f"
# The per-mark tables and the figure's panels: (key, title), FID on a log axis.
TIMELINE_METRICS = (("fid", "FID"), ("precision", "precision"), ("recall", "recall"))


def seed_means(measured: list[tuple[str, dict, str]]) -> dict:
    """The rows of several results files as one run's rows, from (label, record, file) in order.
    A label measured once keeps its record. A label measured in several files is one row run
    with several seeds: its records become "LABEL (seed S)" (marked "averaged_into": LABEL), and
    "LABEL", placed before them, is their `mean_record`. ValueError, naming the files, when such a
    label's records lack a seed or share one."""
    by_label: dict[str, list[tuple[dict, str]]] = {}
    for label, record, path in measured:
        by_label.setdefault(label, []).append((record, path))
    rows = {}
    for label, records in by_label.items():
        if len(records) == 1:
            rows[label] = records[0][0]
            continue
        seeds = [record.get("seed") for record, _ in records]
        if None in seeds or len(set(seeds)) != len(seeds):
            raise ValueError(f"--merge: the row {label!r} is in {', '.join(p for _, p in records)} "
                             f"with the seeds {seeds}; rows of one label must be distinct seeds "
                             f"(rename one otherwise: its key in \"rows\").")
        rows[label] = mean_record([record for record, _ in records])
        for record, _ in records:
            rows[f"{label} (seed {record['seed']})"] = {**record, "averaged_into": label}
    return rows


def mean_record(records: list[dict]) -> dict:
    """The mean over seeds of one row: steps, images per second and each table metric every
    seed has; at each mark, the mean of what every seed scored there; "seeds" lists them."""
    def mean(entries: list[dict], keys) -> dict:
        return {key: statistics.mean(entry[key] for entry in entries) for key in keys
                if all(key in entry for entry in entries)}

    mean_of = mean(records, ("steps", "images_per_second", *COLUMNS))
    mean_of["steps"] = round(mean_of["steps"])
    timeline = [{"minutes": marks[0]["minutes"], **mean(marks, ("seconds", "steps", *COLUMNS))}
                for marks in zip(*(record["timeline"] for record in records))]
    return {**mean_of, "seeds": [record["seed"] for record in records], "timeline": timeline}


def align(lines: list[list[str]]) -> str:
    """Rows of cells as right-aligned columns."""
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    return "\n".join("  ".join(cell.rjust(width) for cell, width in zip(line, widths))
                     for line in lines)


def format_table(results: dict) -> str:
    """The final table: steps, images/second and every metric of each row's final state (the
    COLUMNS that at least one row has)."""
    columns = [key for key in COLUMNS if any(key in record for record in results.values())]
    lines = [["row", "steps", "img/s", *columns]]
    for label, record in results.items():
        cells = [label, str(record["steps"]), f"{record['images_per_second']:.0f}"]
        cells += [format(record[key], FORMATS.get(key, ".3f")) if key in record else "-"
                  for key in columns]
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
    """Draws TIMELINE_METRICS against minutes, one panel each side by side, one line per row
    (the seeds of a mean as thin lines of its colour, without a legend entry), into the PNG
    `path` (written atomically). Returns {panel title: the rows drawn in it}."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

    figure = Figure(figsize=(15, 4.6), dpi=100)
    FigureCanvasAgg(figure)
    drawn: dict[str, list[str]] = {}
    for index, (key, name) in enumerate(TIMELINE_METRICS):
        axes = figure.add_subplot(1, len(TIMELINE_METRICS), index + 1)
        drawn[name] = []
        colours = {}  # a mean's colour, for the thin lines of its seeds
        for label, record in results.items():
            points = [(entry["minutes"], entry[key]) for entry in record["timeline"]
                      if key in entry and math.isfinite(entry[key])]
            if not points:
                continue
            mean = record.get("averaged_into")
            if mean is None:
                seeds = record.get("seeds")
                legend = f"{label} (mean of {len(seeds)} seeds)" if seeds else label
                line, = axes.plot(*zip(*points), marker="o", linewidth=2, label=legend)
                colours[label] = line.get_color()
            else:
                axes.plot(*zip(*points), linewidth=0.8, alpha=0.5, color=colours.get(mean))
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
