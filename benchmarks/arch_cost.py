"""The cost per image of each `--arch`: images/s of training cycles and GFLOPs per image, side by side.

Usage, from the repository root:

    python benchmarks/arch_cost.py                        # dcgan, resnet, r3gan at 28, 32, 64 px
    python benchmarks/arch_cost.py --resolutions 28 --archs dcgan,r3gan \\
        --row "r3gan w16 b1: --arch=r3gan --g_width=16 --d_width=16 --r3gan_blocks=1"
    python benchmarks/arch_cost.py --resolutions 28 --archs dcgan --row "r3gan: --arch=r3gan" \
        --split_row "r3gan, split: --arch=r3gan"      # R3GAN's grouped 3x3 both ways
    python benchmarks/arch_cost.py --json /tmp/cost.json

Every case is a training run built exactly as `run.py --mode=train` builds it
(`cycle_profile.build_training`: `--setup` with the case's flags, `--precision=auto` resolved,
the dataset pipeline, the setup's phases and the `Trainer`'s compiled loop), all in this
process and all with the same `--setup` (default r3gan: relativistic loss with R1 + R2 in every
discriminator update, batch 64), so the networks are the only difference. Each case trains one
cycle (tracing), then one timed cycle that sets how many cycles make a repeat of about
--seconds, then one untimed repeat; then --repeats rounds time every case once per round, the
order rotated by one each round (other processes share the CPU: interleaving spreads their load
over every case).

images/s counts the real images the cycles read, as the trainer's progress line does (the r3gan
setup's generator update reads a real batch too: two batches a cycle); GFLOPs per image is one
cycle's matmul and convolution FLOPs (`benchmarks.flops.graph_flops` of the compiled loop, a
lazy phase counted as if due every cycle: an upper bound for rows with --penalty_every > 1) over
the images a cycle reads on average. "cost vs dcgan" is the dcgan case's median
images/s at that resolution over the case's: how many times DCGAN's time per image it takes.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import shlex
import statistics
import sys
import tempfile
import time
import unittest.mock

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)

from benchmarks.cycle_profile import cpu_flags, load_average  # noqa: E402

ARCHS = ("dcgan", "resnet", "r3gan")
RESOLUTIONS = (28, 32, 64)
REFERENCE_ARCH = "dcgan"
AVERAGED_CYCLES = 10_080  # a multiple of every lazy interval up to 16


@dataclasses.dataclass(frozen=True)
class CostCase:
    """One measured network: its label, resolution and run.py flags (`--name=value` strings)."""

    label: str
    resolution: int
    flags: tuple[str, ...]
    split: bool = False  # train GroupedConv2D group by group (`--split_row`)


def parse_row(text: str, resolution: int, split: bool = False) -> CostCase:
    """`"label: --flag=value ..."` as a case at `resolution`; ValueError naming the fix."""
    label, separator, flags = text.partition(":")
    if not separator or not label.strip() or not flags.strip():
        raise ValueError(f"--row {text!r}: use 'label: --flag=value ...'.")
    parsed = tuple(shlex.split(flags))
    if any(not flag.startswith("--") or "=" not in flag for flag in parsed):
        raise ValueError(f"--row {text!r}: every flag must be written --name=value.")
    return CostCase(label.strip(), resolution, parsed, split)


def flag_values(flags: tuple[str, ...]) -> dict[str, object]:
    """{"name": value} of `--name=value` flags, each value of its declared flag's type;
    ValueError for an undeclared flag."""
    from trainers import api
    from trainers.config.flags import declared
    assert api  # declares every flag
    values = {}
    for name, text in (flag[2:].split("=", 1) for flag in flags):
        if name not in declared():
            raise ValueError(f"--{name} is not a run.py flag.")
        kind = declared()[name].type
        values[name] = text.lower() in ("true", "1") if kind is bool else kind(text)
    return values


def cases(archs: list[str], resolutions: list[int], rows: list[str],
          row_resolutions: list[int], split_rows: tuple[str, ...] = ()) -> list[CostCase]:
    """Each arch at each resolution, then each --row and --split_row at each of
    `row_resolutions`."""
    listed = [CostCase(arch, resolution, (f"--arch={arch}",))
              for resolution in resolutions for arch in archs]
    listed += [parse_row(row, resolution, split) for resolution in row_resolutions
               for row, split in [*((r, False) for r in rows), *((r, True) for r in split_rows)]]
    return listed


def rotated(items: list, round_index: int) -> list:
    """`items` rotated left by `round_index` (each round starts one case later)."""
    shift = round_index % len(items) if items else 0
    return items[shift:] + items[:shift]


def cost_rows(records: list[dict]) -> list[dict]:
    """Each record with its median images/s and its cost relative to the reference arch at its
    resolution (None when that arch was not measured there)."""
    medians = [statistics.median(record["images_per_second"]) for record in records]
    reference = {record["resolution"]: median for record, median in zip(records, medians)
                 if record["label"] == REFERENCE_ARCH}
    return [{**record, "median_images_per_second": median,
             "cost_vs_reference": (reference[record["resolution"]] / median
                                   if record["resolution"] in reference else None)}
            for record, median in zip(records, medians)]


def with_flop_ratios(rows: list[dict]) -> list[dict]:
    """`rows` with each one's GFLOPs per image over the reference arch's at its resolution."""
    reference = {row["resolution"]: row["gflops_per_image"] for row in rows
                 if row["label"] == REFERENCE_ARCH}
    return [{**row, "flops_vs_reference": (row["gflops_per_image"] / reference[row["resolution"]]
                                           if row["resolution"] in reference else None)}
            for row in rows]


def markdown_table(rows: list[dict]) -> list[str]:
    """The cost table (one line per case)."""
    def ratio(value):
        return "-" if value is None else f"{value:.1f}x"
    lines = ["| case | px | precision | parameters (G + D) | GFLOPs / image | FLOPs vs dcgan | "
             "images/s (median) | per round | cost vs dcgan |",
             "| --- | ---: | --- | ---: | ---: | ---: | ---: | --- | ---: |"]
    for row in rows:
        lines.append(
            f"| {row['label']} | {row['resolution']} | {row['precision']} | "
            f"{row['parameters'] / 1e6:.2f} M | {row['gflops_per_image']:.3f} | "
            f"{ratio(row['flops_vs_reference'])} | {row['median_images_per_second']:.0f} | "
            f"{', '.join(f'{v:.0f}' for v in row['images_per_second'])} | "
            f"{ratio(row['cost_vs_reference'])} |")
    return lines


# ------------------------------------------------------------- measuring (imports TensorFlow)

@contextlib.contextmanager
def split_grouped_convolutions(split: bool):
    """With `split`, GroupedConv2D traces its group-by-group form in training too (the form it
    had before it used TensorFlow's grouped kernel), so both can be timed side by side."""
    from gan import r3gan
    if not split:
        yield
        return
    with unittest.mock.patch.object(r3gan, "native_grouped_convolution", lambda dtype: False):
        yield


class Measured:
    """A case's built run, how many cycles make one timed repeat, and its timings."""

    def __init__(self, case: CostCase, args: argparse.Namespace, logdir: str):
        from benchmarks.cycle_profile import build_training
        from trainers.engine import phases as phases_lib
        from benchmarks import flops
        self.case = case
        flags = {"setup": args.setup, "resolution": case.resolution, "precision": args.precision,
                 "train_cycles": args.max_cycles, **flag_values(case.flags)}
        with split_grouped_convolutions(case.split):  # while the loop is traced
            self.config, run, _ = build_training(flags, logdir)
            self.trainer, self.phases = run.trainer, run.trainer.phases
            self.batches_after = phases_lib.batches_after
            self.trainer.train(1)
        self.gflops = flops.graph_flops(self.trainer.loop_graph()) / 1e9
        self.parameters = sum(int(v.numpy().size) for model in run.state.models.values()
                              for v in model.trainable_variables)
        one_cycle = self.time(1)[0]
        self.cycles = max(1, min(round(args.seconds / max(one_cycle, 1e-6)),
                                 (args.max_cycles - 2) // (args.repeats + 1)))
        self.images_per_second: list[float] = []

    def time(self, cycles: int) -> tuple[float, int]:
        """Seconds of `cycles` cycles (the trainer reads its step counter at the end, so the
        work is done) and the real images they read."""
        step = int(self.trainer.state.step.numpy())
        began = time.perf_counter()
        self.trainer.train(cycles)
        int(self.trainer.state.step.numpy())
        seconds = time.perf_counter() - began
        images = (self.batches_after(self.phases, step + cycles)
                  - self.batches_after(self.phases, step)) * self.trainer.global_batch_size
        return seconds, images

    def record(self) -> dict:
        # Averaged over many cycles: a lazy phase reads its own batch only when it is due.
        images_per_cycle = (self.batches_after(self.phases, AVERAGED_CYCLES)
                            * self.trainer.global_batch_size / AVERAGED_CYCLES)
        return {"label": self.case.label, "resolution": self.case.resolution,
                "flags": list(self.case.flags), "precision": self.config.precision,
                "batch_size": self.config.batch_size, "cycles_per_repeat": self.cycles,
                "images_per_cycle": images_per_cycle, "parameters": self.parameters,
                "gflops_per_image": self.gflops / images_per_cycle,
                "images_per_second": self.images_per_second}


def measure(args: argparse.Namespace) -> list[dict]:
    """Builds every case, then times them in --repeats interleaved rounds."""
    listed = cases(args.archs, args.resolutions, args.row, args.row_resolutions, args.split_row)
    built = []
    with tempfile.TemporaryDirectory(prefix="arch_cost_", ignore_cleanup_errors=True) as root:
        for index, case in enumerate(listed):
            print(f"[{time.strftime('%H:%M:%S')}] building {case.label} at {case.resolution} px "
                  f"(load {load_average()})", flush=True)
            built.append(Measured(case, args, os.path.join(root, str(index))))
            print(f"  {built[-1].gflops:.2f} GFLOPs per cycle, {built[-1].cycles} cycles per "
                  "repeat", flush=True)
        # An untimed round first: in every run, the first round of calibrated calls ran 2 to 5
        # times slower than the next ones.
        for measured in built:
            measured.time(measured.cycles)
        for round_index in range(args.repeats):
            for measured in rotated(built, round_index):
                seconds, images = measured.time(measured.cycles)
                measured.images_per_second.append(images / seconds)
            print(f"[{time.strftime('%H:%M:%S')}] round {round_index + 1}/{args.repeats} done "
                  f"(load {load_average()})", flush=True)
    return with_flop_ratios(cost_rows([measured.record() for measured in built]))


def parse_list(kind, allowed=None):
    def parse(text: str) -> list:
        values = [kind(item) for item in text.split(",") if item]
        if not values or (allowed and any(value not in allowed for value in values)):
            raise argparse.ArgumentTypeError(f"{text!r}: use a comma-separated list"
                                             + (f" of {', '.join(map(str, allowed))}." if allowed
                                                else "."))
        return values
    return parse


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--archs", type=parse_list(str, ARCHS), default=list(ARCHS))
    parser.add_argument("--resolutions", type=parse_list(int), default=list(RESOLUTIONS))
    parser.add_argument("--row", action="append", default=[], metavar="'LABEL: --FLAG=V ...'",
                        help="an extra case (e.g. a narrow --arch=r3gan), repeatable")
    parser.add_argument("--split_row", action="append", default=[],
                        metavar="'LABEL: --FLAG=V ...'",
                        help="like --row, with R3GAN's grouped 3x3 trained group by group")
    parser.add_argument("--row_resolutions", type=parse_list(int), default=[28],
                        help="resolutions of the --row cases (default 28)")
    parser.add_argument("--setup", default="r3gan", help="the preset every case trains")
    parser.add_argument("--precision", default="auto", help="run.py's --precision for every case")
    parser.add_argument("--seconds", type=float, default=1.5, help="about this long per repeat")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved rounds")
    parser.add_argument("--max_cycles", type=int, default=200,
                        help="--train_cycles of each run (the pipeline then caches the data "
                             "while training instead of holding all of it in memory first)")
    parser.add_argument("--json", default="", metavar="PATH", help="also write the rows here")
    args = parser.parse_args(argv)
    if args.repeats < 1 or args.seconds <= 0 or args.max_cycles < args.repeats + 3:
        parser.error("--repeats must be >= 1, --seconds positive, --max_cycles >= --repeats + 3.")
    try:
        for case in cases(args.archs, args.resolutions, args.row, args.row_resolutions,
                          args.split_row):
            flag_values(case.flags)
    except ValueError as error:
        parser.error(str(error))
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    started, load_before = time.perf_counter(), load_average()
    rows = measure(args)
    command = shlex.join(["python", "benchmarks/arch_cost.py", *sys.argv[1:]])
    print("\n".join(["", f"Command: `{command}`",
                     f"--setup={args.setup} for every case, batch {rows[0]['batch_size']}; CPU "
                     f"bfloat16 flags: {cpu_flags()}; {os.cpu_count()} logical CPUs; load "
                     f"average (1, 5, 15 min) before {load_before}, after {load_average()}; "
                     f"{time.perf_counter() - started:.0f} s.", "", *markdown_table(rows)]))
    if args.json:
        with open(args.json, "w") as file:
            json.dump({"command": command, "cpu_flags": cpu_flags(), "rows": rows}, file, indent=2)


if __name__ == "__main__":
    main()
