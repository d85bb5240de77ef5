"""Sample quality of Gantry's presets against two hand-written DCGANs, at equal wall clock.

Usage, from the repository root (the domain evaluator must exist: `python run.py
--mode=train_evaluator`, about two minutes; this script trains it when it is missing):

    python benchmarks/quality.py                          # reference, strong and dcgan, 10 min each
    python benchmarks/quality.py --presets dcgan,lsgan,sngan,r1,cgan,acgan
    python benchmarks/quality.py --minutes 3 --row "dcgan-ema: --setup=dcgan --ema_halflife_kimg=10"
    python benchmarks/quality.py --minutes 10 --eval_minutes 2 --presets dcgan \
        --plot benchmarks/results/quality_over_time.png     # FID etc. at 2, 4, ..., 10 min
    python benchmarks/quality.py --minutes 60 --eval_minutes 10 --no_reference --presets dcgan \
        --ema_halflife_kimg 10 --checkpoint_every 1000    # the long run, raw and EMA generator
    python benchmarks/quality.py --merge /tmp/q/dcgan.json /tmp/q/sngan.json --json both.json
    python benchmarks/quality.py --cores 2 --seeds 0,1,2 --no_reference --row strong \
        --presets dcgan --row "r3gan: --setup=r3gan --train_time=540s"
        # three seeds of each, two rows at a time side by side, one core each: means and seeds

Every row trains in its own process for the same wall-clock budget, counted from the moment the
process starts (imports, data loading and tracing included, as a user would experience it):
the baselines stop themselves at the deadline: "reference", the TensorFlow tutorial's recipe
(`benchmarks/tutorial_dcgan.py`: fused step, Adam 1e-4, batch 256), and "strong", a competent
user's DCGAN (`benchmarks/strong_dcgan.py`: Adam 2e-4 with beta1 0.5, batch 64, one D then one G
update); a Gantry row is `run.py --mode=train` with an unreachable
--train_cycles, stopped at the deadline with SIGTERM, which Gantry answers by checkpointing at
the end of the current loop and exiting with code 42 (its preemption path). A row that gives its
own --train_cycles (a learning rate decaying to 0 there needs one) may finish before the
deadline; its marks after then score its final state. Each row is then
scored by the same evaluator on the same real test images: `run.py --mode=eval` for Gantry
rows, `trainers.evaluation.image_evaluation.ImageEvaluation` on a baseline's saved samples.

FID against wall time (`--eval_minutes M`, default 2; 0: only the end): every row is also
scored at the marks M, 2M, ... minutes before the budget, the last mark being the budget itself,
without evaluating during training. A row's state at a mark is the newest state it saved at
most that many seconds after quality.py launched its process (the budget's clock); the last
mark is the state it stopped with, the one the final table scores. A Gantry row saves a
checkpoint every `--checkpoint_every` cycles (default 100: about every 4 s and 11 MB for the
dcgan preset) and keeps them all; a checkpoint's time is its index file's modification time
(written just after the state it holds); after training, the newest one at or before each
mark is scored with `run.py --mode=eval --checkpoint=STEP`, which also adds it to the row's
LOGDIR/eval/, so `--mode=plot` draws it. A baseline copies its generator's weights into shadow
variables at the start of every compiled call (`recipes.train_until`), keeps the copy of the
last call boundary at or before each mark, and samples from it after the deadline. Saving
costs training time (the checkpoints, the in-graph copies), scoring none. A mark passed during
a row's first (tracing) call scores the state before it. Besides the final table, the script
prints a table per metric (FID, precision, recall: a line per row, a column per mark), writes
every mark to the JSON file (each row's "timeline") and draws the three against minutes into
`--plot`.

A row whose run keeps an EMA generator of its own (the r3gan preset's, or a row's
--ema_halflife_kimg) is scored twice, raw under its label and averaged as "LABEL + EMA".
With `--ema_halflife_kimg H` every Gantry row also keeps an EMA generator (half-life H thousand
images, 5% ramp-up) and is scored twice from the same checkpoints: under its label with the raw
generator (`--nouse_ema`: it trains exactly as it would without the average, which only reads
its weights; the update costs a few cycles), and as "LABEL + EMA" with the average. Both
scorings land in the row's LOGDIR/eval/ at the same steps.

The table lists FID, KID, precision, recall, coverage and class KL (domain evaluator features
and classes), class accuracy for conditional presets, the cycles/steps done and the real
images consumed per second (from launch until the row stopped training). On Fashion-MNIST,
the targets are checked for the `dcgan` row (at the 10-minute mark, FID at most a tenth of the
reference's and a third of the strong baseline's: BASELINE_DIVISORS; at the last mark,
precision >= 0.65 and recall >= 0.75) and for `cgan` (class accuracy >= 0.8, at the last
mark); with a budget of 60 minutes or more and a 10-minute mark, also for `dcgan` and
`dcgan + EMA`: the last FID at most half the 10-minute one, and no mark from 10 minutes on more
than FID_SEED_NOISE above the one before it. The WGAN family is held to a multiple of the
`dcgan` row's FID at the same mark (FID_RATIO_TARGETS: `wgan_gp` and `sngan` 2x at 10 minutes and
1.25x at 60, `wgan` 2x at 60), the best Gantry row at 10 and 60 minutes to a multiple of the
strong baseline's FID there (BEST_TO_STRONG: 0.6x and 0.5x), and every Gantry row to a recall
of at least LONG_RUN_RECALL at 60 minutes. On stacked Fashion-MNIST, only `r3gan` is checked, at
60 minutes (MODE_TARGETS: modes of 1,000 and their KL). The script exits with status 1 when a
checked target fails.

`--cores N` trains N rows at a time side by side instead of one after another: each in a
quality.py process of its own (`--no_reference --row ROW --seed S`, output in WORKDIR/ROW-seedS.log
and .json) pinned to one core, all N started together, the next N when they have all ended;
then their files are merged as below. `--seeds 0,1,2` (with `--cores`) trains every row once
per seed, rows first: with three rows, three seeds and two cores, nine rows in five waves, the
last alone on the machine.

`--merge A.json B.json ...` trains nothing: it reports rows that separate invocations measured
at the same time (for example one row per core, each invocation under `taskset -c N`, all
started together, so that every row sees the same machine state) as one run: the table, the
per-mark tables, the figure and the checks of all their rows, written to `--json`. The files
must share their budget, marks and sample count. A label in several files is one row measured
with several seeds (`--seed`, recorded with each row): the report lists each seed as
"LABEL (seed S)" and, under "LABEL", their mean (final metrics and every mark), which the
targets are checked on and the figure draws bold over its seeds' thin lines. So three seeds of
three rows, run one pair of invocations at a time, are one table of means and seeds:

    python benchmarks/quality.py --merge /tmp/q/*-seed*.json --json 10min.json --plot 10min.png
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import math
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from typing import Callable

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from benchmarks import quality_report  # noqa: E402
import trainers.api  # noqa: E402,F401  declares every flag, in order, before a Config is made
from trainers.evaluation import tags  # noqa: E402

REFERENCE, STRONG = "reference", "strong"
BASELINES = {REFERENCE: "tutorial_dcgan.py", STRONG: "strong_dcgan.py"}  # label: recipe script
FINISHED_EXIT_CODE = 0  # a row whose own --train_cycles ended it before the deadline
PREEMPTED_EXIT_CODE = 42  # trainers.engine.preemption.RESTART_EXIT_CODE, without importing TensorFlow
FINISHED_LINE = "Finished at step"  # trainers.modes.train prints it once a run has ended
KEEP_EVERY_CHECKPOINT = 1_000_000  # --keep_checkpoints of a Gantry row scored at marks
PLOT_FILE = "quality_over_time.png"
EMA_RAMPUP = 0.05  # --ema_rampup of the rows of --ema_halflife_kimg
LONG_RUN_MINUTES, SHORT_RUN_MINUTES = 60, 10  # the long-run target: FID halved from 10 to 60 min
# How much worse than the mark before a later mark's FID may be: the spread of three seeds of the
# dcgan preset's 10-minute FID (15.6 to 18.1, results/quality.md), 15% of their mean.
FID_SEED_NOISE = 0.15
# The WGAN family against the dcgan preset, at the same mark of the same run: label: {minutes:
# the most its FID may be, as a multiple of dcgan's}. Each keeps its method (a penalised or a
# clipped Wasserstein critic, spectral norm), so it is held to a ratio, not to dcgan's figure.
FID_RATIO_TARGETS = {"wgan_gp": {10: 2.0, 60: 1.25}, "sngan": {10: 2.0, 60: 1.25},
                     "wgan": {60: 2.0}}
LONG_RUN_RECALL = 0.6  # the least recall of any Gantry row at LONG_RUN_MINUTES
# The best Gantry row against the strong baseline, at the same mark: {minutes: the most its FID
# may be, as a multiple of strong's} (with seeds merged, both are means over their seeds).
BEST_TO_STRONG = {10: 0.6, 60: 0.5}
# The dcgan row against each baseline at SHORT_RUN_MINUTES, the budget these targets were set
# for: baseline: what the baseline's FID is divided by to give the most dcgan's may be.
BASELINE_DIVISORS = {REFERENCE: 10, STRONG: 3}
# The settings a --json file records beside its rows; --merge requires them equal across files
# (a file without "dataset" was written before it was recorded: Fashion-MNIST).
RUN_SETTINGS = ("minutes", "eval_minutes", "marks", "eval_samples", "dataset")
# The flags of this script that every process of a side-by-side run (--cores) is given as this
# one was: a row's budget, marks, checkpoints, scoring and data are its run's.
SIDE_BY_SIDE_SETTINGS = ("minutes", "eval_minutes", "checkpoint_every", "eval_samples", "dataset")
# Stacked Fashion-MNIST at LONG_RUN_MINUTES: label: (the least modes of 1,000, the most KL).
MODE_TARGETS = {"r3gan": (990, 0.1)}


@dataclasses.dataclass(frozen=True)
class Dataset:
    """A --dataset of this script: its name in titles and the targets its rows are held to
    (Fashion-MNIST's mean nothing on stacked channels, the modes nothing on one channel)."""

    title: str
    checks: Callable[[dict], list[tuple[str, bool]]]


@dataclasses.dataclass(frozen=True)
class Row:
    """One competitor: a baseline recipe (no flags), or `run.py` with these training flags."""

    label: str
    flags: tuple[str, ...] = ()


def parse_row(text: str) -> Row:
    """"LABEL: FLAGS..." (flags for run.py), a baseline's label, or a bare preset name."""
    label, _, flags = text.partition(":")
    label = label.strip()
    if not label:
        raise argparse.ArgumentTypeError(f"--row {text!r}: give a label, e.g. 'dcgan: --setup=dcgan'.")
    if not flags.strip():
        return Row(label) if label in BASELINES else Row(label, (f"--setup={label}",))
    return Row(label, tuple(shlex.split(flags)))


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="wall-clock budget per row")
    parser.add_argument("--eval_minutes", type=float, default=2.0,
                        help="also score every row at these many minutes, twice these, ... "
                             "(0: only at the end of the budget)")
    parser.add_argument("--ema_halflife_kimg", type=float, default=0.0,
                        help="train every Gantry row with an EMA generator of this half-life "
                             "and score it beside the raw one, as the row 'LABEL + EMA' (0: off)")
    parser.add_argument("--checkpoint_every", type=int, default=100,
                        help="cycles between the checkpoints of a Gantry row scored at marks")
    parser.add_argument("--presets", default="",
                        help="comma-separated presets to add as rows (with their default flags)")
    parser.add_argument("--row", type=parse_row, action="append", default=[],
                        help="'LABEL: RUN.PY FLAGS' (repeatable); 'reference' is the tutorial, "
                             "'strong' the strong baseline")
    parser.add_argument("--no_reference", action="store_true", help="skip the baseline rows")
    parser.add_argument("--eval_samples", type=int, default=10_000)
    parser.add_argument("--dataset", choices=sorted(DATASETS), default="fashion_mnist",
                        help="what every Gantry row trains on (stacked_fashion_mnist: also modes "
                             "of 1,000 and their KL from uniform; the baselines train "
                             "Fashion-MNIST only, so give --no_reference)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cores", type=int, default=0,
                        help="train this many rows at a time, each in its own process pinned to "
                             "one core, started together, and report them as one run (0: one "
                             "row after another in this process, on every core)")
    parser.add_argument("--seeds", default="",
                        help="comma-separated seeds, with --cores: every row is trained once per "
                             "seed and reported per seed and as their mean (default: --seed)")
    parser.add_argument("--workdir", default="/tmp/gantry-quality",
                        help="run directories (each row's is replaced)")
    parser.add_argument("--json", default="quality.json", help="where to write the results")
    parser.add_argument("--plot", default=None,
                        help=f"the PNG of FID, precision and recall against minutes (default "
                             f"WORKDIR/{PLOT_FILE})")
    parser.add_argument("--merge", nargs="+", default=[], metavar="JSON",
                        help="train nothing: report the rows of these --json files of earlier "
                             "invocations, run at the same time, as one run")
    args = parser.parse_args()
    if args.merge:
        if args.row or args.presets:
            parser.error("--merge reports rows measured before: give no --row or --presets "
                         "with it.")
        try:
            settings, args.merged = merged_results(args.merge)
        except ValueError as error:
            parser.error(str(error))
        vars(args).update(settings)
    if args.dataset != "fashion_mnist" and not args.no_reference and not args.merge:
        parser.error(f"--dataset={args.dataset}: the baseline recipes train Fashion-MNIST only; "
                     f"give --no_reference.")
    if (args.minutes <= 0 or args.eval_minutes < 0 or args.checkpoint_every < 1
            or args.ema_halflife_kimg < 0):
        parser.error("--minutes must be positive, --eval_minutes and --ema_halflife_kimg 0 or "
                     "positive and --checkpoint_every at least 1.")
    available = len(os.sched_getaffinity(0))
    if args.cores < 0 or args.cores > available or (args.cores and args.merge):
        parser.error(f"--cores must be 0 (rows one after another) or 1 to the {available} cores "
                     f"this process may use, and trains rows, so not with --merge.")
    try:
        args.seeds = [int(seed) for seed in args.seeds.split(",")] if args.seeds else [args.seed]
    except ValueError:
        parser.error(f"--seeds={args.seeds}: give whole numbers separated by commas, e.g. 0,1,2.")
    if len(args.seeds) > 1 and not args.cores:
        parser.error("--seeds trains each row once per seed side by side: give --cores too "
                     "(e.g. --cores 2).")
    if not args.merge:
        args.marks = marks(args.minutes, args.eval_minutes)
    args.plot = args.plot or os.path.join(args.workdir, PLOT_FILE)
    rows = [] if args.no_reference else [Row(label) for label in BASELINES]
    rows += args.row + [parse_row(name) for name in args.presets.split(",") if name]
    if not args.row and not args.presets:
        rows.append(parse_row("dcgan"))
    if args.ema_halflife_kimg:
        rows = [with_ema(row, args.ema_halflife_kimg) for row in rows]
    labels = [row.label for row in rows] + [ema_label(row.label) for row in rows if row.flags]
    if len(set(labels)) != len(labels):
        parser.error(f"row labels must be unique: {labels}")
    args.rows = rows
    return args


def merged_results(paths: list[str]) -> tuple[dict, dict]:
    """(RUN_SETTINGS, rows by label) of the --json files at `paths`. A label in several files
    is one row measured with several seeds: each becomes "LABEL (seed S)", and "LABEL" their
    mean (`quality_report.seed_means`). ValueError, naming the file, when one cannot be read,
    their settings differ, or a label is in two of them with the same (or no recorded) seed."""
    settings, measured = None, []
    for path in paths:
        try:
            with open(path) as file:
                written = json.load(file)
            own = {key: written[key] for key in RUN_SETTINGS if key != "dataset"}
            own["dataset"] = written.get("dataset", "fashion_mnist")
            own_rows = written["rows"]
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise ValueError(f"--merge {path}: not a results file of quality.py --json "
                             f"({type(error).__name__}: {error}).") from None
        if settings is not None and own != settings:
            raise ValueError(f"--merge {path}: its settings {own} differ from those of "
                             f"{paths[0]}, {settings}; merge only rows measured alike.")
        settings = own
        measured += [(label, record, path) for label, record in own_rows.items()]
    return settings, quality_report.seed_means(measured)


def with_ema(row: Row, halflife_kimg: float) -> Row:
    """A Gantry row that also keeps an EMA generator (StyleGAN's 5% ramp-up). Its raw generator
    trains exactly as without one (the average only reads the weights), so the row is scored
    with `--nouse_ema` under its own label and with the average as `ema_label(row.label)`."""
    if not row.flags:
        return row
    return Row(row.label, (*row.flags, f"--ema_halflife_kimg={halflife_kimg:g}",
                           f"--ema_rampup={EMA_RAMPUP:g}"))


def ema_label(label: str) -> str:
    return f"{label} + EMA"


def marks(minutes: float, every: float) -> list[float]:
    """The marks in minutes: `every`, 2 x `every`, ... below `minutes`, then `minutes`."""
    if every <= 0:
        return [minutes]
    below = math.ceil(minutes / every - 1e-9) - 1
    return [round(every * count, 9) for count in range(1, below + 1)] + [minutes]


def mark_seconds(minutes: float) -> float:
    """A mark in seconds, as passed to and recorded by a baseline recipe (`--marks`)."""
    return round(minutes * 60, 3)


def run_py(*flags: str, **popen) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, os.path.join(REPO_ROOT, "run.py"), *flags],
                            cwd=REPO_ROOT, **popen)


def ensure_evaluator() -> None:
    """Trains and caches the Fashion-MNIST domain evaluator unless it exists."""
    from gan import evaluator

    if not os.path.exists(os.path.join(evaluator.evaluator_dir("fashion_mnist", resolution=28),
                                       "evaluator.json")):
        print("Training the domain evaluator (once, about two minutes)...", flush=True)
        if run_py("--mode=train_evaluator", "--dataset=fashion_mnist").wait():
            sys.exit("Training the domain evaluator failed; see the output above.")


def train_row(row: Row, directory: str, budget: float, seed: int, checkpoint_every: int = 0,
              dataset: str = "fashion_mnist") -> dict:
    """Trains one Gantry row until the deadline (or its own --train_cycles), keeping a checkpoint
    every `checkpoint_every` cycles (0: only the final one); returns steps, images per second,
    whether the run kept an EMA generator (its preset's or --ema_halflife_kimg's: it is then
    scored raw and averaged) and, under "started", the Unix time its process was launched."""
    keep = ([f"--checkpoint_every={checkpoint_every}", f"--keep_checkpoints={KEEP_EVERY_CHECKPOINT}"]
            if checkpoint_every else ["--checkpoint_every=0"])
    started = time.time()
    log_path = os.path.join(directory, "train.log")
    with open(log_path, "w") as log:
        process = run_py("--mode=train", f"--logdir={directory}", "--train_cycles=100000000",
                         *keep, "--image_every=0", "--histogram_every=0",
                         f"--seed={seed}", f"--dataset={dataset}", *row.flags, stdout=log,
                         stderr=subprocess.STDOUT)
        try:
            process.wait(timeout=budget)
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=600)
    with open(log_path) as log:
        output = log.read()
    if not completed(process.returncode, output):
        sys.exit(f"Row {row.label!r} neither finished nor stopped at the deadline as "
                 f"preempted (exit {process.returncode}):\n{output[-3000:]}")
    with open(os.path.join(directory, "config.json")) as file:
        config = json.load(file)
    steps = _last_step(directory)
    images = steps * config["batch_size"] * config["d_updates"]
    return {"steps": steps, "images_per_second": images / (time.time() - started),
            "batch_size": config["batch_size"], "flags": list(row.flags), "started": started,
            "keeps_ema": bool(config.get("ema_halflife_kimg"))}


def completed(returncode: int, output: str) -> bool:
    """Whether a row's run left a result: it finished (its own --train_cycles or --train_time),
    stopped at the deadline as preempted, or had finished when the deadline's SIGTERM reached
    it on its way out (after the final checkpoint and samples; its log ends the run)."""
    return (returncode in (FINISHED_EXIT_CODE, PREEMPTED_EXIT_CODE)
            or (returncode == -signal.SIGTERM and FINISHED_LINE in output))


def _last_step(directory: str) -> int:
    from trainers.modes import restore

    return restore.checkpoint_step(restore.latest_checkpoint(directory))


def saved_checkpoints(directory: str, started: float) -> list[tuple[float, int]]:
    """(seconds after `started` its index file was written, step) of every kept checkpoint of
    the run in `directory`, oldest first."""
    from trainers.config.record import CHECKPOINT_SUBDIR
    from trainers.engine.checkpoints import listed_checkpoints, path_number

    return sorted((os.path.getmtime(f"{path}.index") - started, path_number(path))
                  for path in listed_checkpoints(os.path.join(directory, CHECKPOINT_SUBDIR)))


def newest_at(saved: list[tuple[float, int]], seconds: float) -> tuple[float, int] | None:
    """The newest (seconds, step) of `saved` at or before `seconds`; None when none is."""
    return max((entry for entry in saved if entry[0] <= seconds), default=None)


def gantry_timeline(row: Row, directory: str, record: dict, args, *, use_ema: bool) -> list[dict]:
    """The row's metrics at every mark: the newest checkpoint at or before each one scored by
    `run.py --mode=eval --checkpoint=STEP` (a step once; the EMA or the raw generator), the last
    mark its final record."""
    saved = saved_checkpoints(directory, record["started"])
    timeline, scored = [], {}
    for minutes in args.marks[:-1]:
        newest = newest_at(saved, mark_seconds(minutes))
        if newest is None:
            timeline.append({"minutes": minutes})
            continue
        seconds, step = newest
        if step not in scored:
            scored[step] = evaluate_row(row, directory, args.eval_samples, checkpoint=step,
                                        use_ema=use_ema)
        timeline.append(mark_entry(minutes, seconds, step, scored[step]))
    final_seconds = max(seconds for seconds, step in saved if step == record["steps"])
    return timeline + [mark_entry(args.marks[-1], final_seconds, record["steps"], record)]


def mark_entry(minutes: float, seconds: float, steps: int, metrics: dict) -> dict:
    """A timeline entry: the mark, the scored state's age and step, its table metrics."""
    return {"minutes": minutes, "seconds": round(seconds, 1), "steps": steps,
            **{key: metrics[key] for key in quality_report.COLUMNS if key in metrics}}


def evaluate_row(row: Row, directory: str, eval_samples: int, checkpoint: int | None = None, *,
                 use_ema: bool = True) -> dict:
    """`run.py --mode=eval` of the row's latest checkpoint, or of the kept step `checkpoint`,
    sampling with the EMA generator (where the row keeps one) or the raw one."""
    which = [] if checkpoint is None else [f"--checkpoint={checkpoint}"]
    process = run_py("--mode=eval", f"--logdir={directory}", f"--eval_samples={eval_samples}",
                     *which, "--use_ema" if use_ema else "--nouse_ema",
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    output, errors = process.communicate()
    if process.returncode:
        sys.exit(f"Evaluating {row.label!r} failed:\n{errors[-3000:]}")
    return on_domain_features(json.loads(output.strip().splitlines()[-1]))


def on_domain_features(results: dict) -> dict:
    """`results` with the domain evaluator's metric keys under the plain names this benchmark's
    tables use ("fid_domain" -> "fid"): every figure here is on the domain features."""
    named = {}
    for key, value in results.items():
        metric, features = tags.split_features(key)
        if features in (None, "domain"):
            named[metric] = value
    return named


def baseline_row(label: str, directory: str, budget: float, args) -> dict:
    """Trains a baseline recipe until the deadline, keeping its state at each mark before the
    last, and scores its saved samples; the record's "timeline" holds every mark."""
    started = time.time()
    samples_path = os.path.join(directory, "samples.npy")
    command = [sys.executable, os.path.join(REPO_ROOT, "benchmarks", BASELINES[label]),
               f"--deadline={started + budget}", f"--started={started}",
               f"--marks={','.join(str(mark_seconds(minutes)) for minutes in args.marks[:-1])}",
               f"--output={samples_path}", f"--num_samples={args.eval_samples}",
               f"--seed={args.seed}"]
    if subprocess.run(command, cwd=REPO_ROOT).returncode:
        sys.exit(f"The {label} recipe failed; see the output above.")
    with open(os.path.join(directory, "samples.json")) as file:
        record = json.load(file)
    final = {"steps": record["steps"], "images_per_second": record["images"] / record["seconds"],
             "batch_size": record["batch_size"], "flags": [], **score_samples(samples_path, args)}
    kept = {saved["mark"]: saved for saved in record["marks"]}
    timeline = []
    for minutes in args.marks[:-1]:
        saved = kept.get(mark_seconds(minutes))
        timeline.append({"minutes": minutes} if saved is None else mark_entry(
            minutes, saved["seconds"], saved["steps"], score_samples(saved["output"], args)))
    return {**final, "timeline": timeline + [
        mark_entry(args.marks[-1], record["seconds"], record["steps"], final)]}


def score_samples(path: str, args) -> dict:
    """The metrics `run.py --mode=eval` reports, for saved uint8 samples."""
    import numpy as np

    from gan import evaluation

    images = np.load(path).astype(np.float32) / 127.5 - 1.0
    return on_domain_features(image_evaluation(args.eval_samples)(
        evaluation.replay_sampler(images), latent_shape=(1,)))


@functools.cache
def image_evaluation(eval_samples: int):
    """The image evaluation of `run.py --mode=eval` on Fashion-MNIST (its real reference
    featurised once for every baseline and mark)."""
    from trainers.config.flags import Config
    from trainers.evaluation.image_evaluation import ImageEvaluation

    config = Config(mode="eval", dataset="fashion_mnist", eval_samples=eval_samples, seed=0)
    return ImageEvaluation(config, config)


def check_targets(results: dict, dataset: str) -> list[tuple[str, bool]]:
    """(description, passed) for every target of `dataset` whose rows are present."""
    return DATASETS[dataset].checks(results)


def fashion_mnist_checks(results: dict) -> list[tuple[str, bool]]:
    """The Fashion-MNIST targets: dcgan against the baselines, the long run, the WGAN family
    against dcgan, the best Gantry row against strong, every row's recall, cgan's classes."""
    checks = []
    ours = row_scored_at(results, "dcgan", SHORT_RUN_MINUTES)
    for baseline, divisor in BASELINE_DIVISORS.items():
        theirs = row_scored_at(results, baseline, SHORT_RUN_MINUTES)
        if ours and theirs:
            checks.append((f"dcgan FID {ours['fid']:.2f} at {SHORT_RUN_MINUTES} min <= {baseline} "
                           f"FID {theirs['fid']:.2f} / {divisor} = {theirs['fid'] / divisor:.2f}",
                           ours["fid"] <= theirs["fid"] / divisor))
    if "dcgan" in results:
        checks.append((f"dcgan precision {results['dcgan']['precision']:.3f} >= 0.65",
                       results["dcgan"]["precision"] >= 0.65))
        checks.append((f"dcgan recall {results['dcgan']['recall']:.3f} >= 0.75",
                       results["dcgan"]["recall"] >= 0.75))
    for label in ("dcgan", ema_label("dcgan")):
        if label in results:
            checks += long_run_checks(label, results[label]["timeline"])
    checks += fid_ratio_checks(results) + best_to_strong_checks(results)
    checks += long_run_recall_checks(results)
    if "cgan" in results and "class_accuracy" in results["cgan"]:
        checks.append((f"cgan class accuracy {results['cgan']['class_accuracy']:.3f} >= 0.8",
                       results["cgan"]["class_accuracy"] >= 0.8))
    return checks


def scored_at(timeline: list[dict], minutes: float) -> dict | None:
    """The timeline's scored entry at the mark `minutes`; None when it has none."""
    return next((entry for entry in timeline if entry["minutes"] == minutes and "fid" in entry),
                None)


def row_scored_at(results: dict, label: str, minutes: float) -> dict | None:
    """The scored entry of the row `label` at the mark `minutes`; None when the row is absent
    or has none there."""
    return scored_at(results.get(label, {}).get("timeline", []), minutes)


def fid_ratio_checks(results: dict) -> list[tuple[str, bool]]:
    """FID_RATIO_TARGETS at every mark that both the row and `dcgan` scored."""
    checks = []
    for label, ratios in FID_RATIO_TARGETS.items():
        for minutes, ratio in ratios.items():
            ours = row_scored_at(results, label, minutes)
            dcgan = row_scored_at(results, "dcgan", minutes)
            if ours and dcgan:
                checks.append((f"{label} FID {ours['fid']:.2f} at {minutes:g} min <= {ratio:g} x "
                               f"dcgan FID {dcgan['fid']:.2f} = {ratio * dcgan['fid']:.2f}",
                               ours["fid"] <= ratio * dcgan["fid"]))
    return checks


def gantry_rows(results: dict) -> dict:
    """The Gantry rows of `results` that targets hold: no baseline, no single seed of a mean."""
    return {label: result for label, result in results.items()
            if label not in BASELINES and "averaged_into" not in result}


def best_to_strong_checks(results: dict) -> list[tuple[str, bool]]:
    """BEST_TO_STRONG at every mark that the strong baseline and a Gantry row scored: the Gantry
    row with the lowest FID there against the strong baseline's."""
    checks = []
    for minutes, ratio in BEST_TO_STRONG.items():
        strong = row_scored_at(results, STRONG, minutes)
        scored = {label: entry for label, result in gantry_rows(results).items()
                  if (entry := scored_at(result.get("timeline", []), minutes))}
        if strong and scored:
            label = min(scored, key=lambda label: scored[label]["fid"])
            fid = scored[label]["fid"]
            checks.append((f"best Gantry row {label} FID {fid:.2f} at {minutes:g} min <= "
                           f"{ratio:g} x strong FID {strong['fid']:.2f} = "
                           f"{ratio * strong['fid']:.2f}", fid <= ratio * strong["fid"]))
    return checks


def mode_checks(results: dict) -> list[tuple[str, bool]]:
    """MODE_TARGETS at LONG_RUN_MINUTES, for the rows that counted modes there."""
    checks = []
    for label, (least_modes, most_kl) in MODE_TARGETS.items():
        entry = row_scored_at(results, label, LONG_RUN_MINUTES)
        if entry and "modes" in entry:
            checks += [(f"{label} modes {entry['modes']:.0f} at {LONG_RUN_MINUTES} min >= "
                        f"{least_modes}", entry["modes"] >= least_modes),
                       (f"{label} mode KL {entry['modes_kl']:.3f} at {LONG_RUN_MINUTES} min <= "
                        f"{most_kl:g}", entry["modes_kl"] <= most_kl)]
    return checks


# Every --dataset, by its name on the command line.
DATASETS = {"fashion_mnist": Dataset("Fashion-MNIST", fashion_mnist_checks),
            "stacked_fashion_mnist": Dataset("Stacked Fashion-MNIST", mode_checks)}


def long_run_recall_checks(results: dict) -> list[tuple[str, bool]]:
    """Every Gantry row's recall at LONG_RUN_MINUTES at least LONG_RUN_RECALL."""
    checks = []
    for label, result in gantry_rows(results).items():
        entry = scored_at(result.get("timeline", []), LONG_RUN_MINUTES)
        if entry:
            checks.append((f"{label} recall {entry['recall']:.3f} at {LONG_RUN_MINUTES} min >= "
                           f"{LONG_RUN_RECALL:g}", entry["recall"] >= LONG_RUN_RECALL))
    return checks


def long_run_checks(label: str, timeline: list[dict]) -> list[tuple[str, bool]]:
    """For a budget of LONG_RUN_MINUTES or more with a SHORT_RUN_MINUTES mark: the last mark's
    FID at most half the short mark's, and no later mark's FID above the one before it by more
    than FID_SEED_NOISE."""
    scored = [entry for entry in timeline if "fid" in entry]
    short = scored_at(timeline, SHORT_RUN_MINUTES)
    if short is None or timeline[-1]["minutes"] < LONG_RUN_MINUTES:
        return []
    last = scored[-1]
    checks = [(f"{label} FID {last['fid']:.2f} at {last['minutes']:g} min <= its "
               f"{SHORT_RUN_MINUTES}-min FID / 2 = {short['fid'] / 2:.2f}",
               last["fid"] <= short["fid"] / 2)]
    later = [entry for entry in scored if entry["minutes"] >= SHORT_RUN_MINUTES]
    for before, after in zip(later, later[1:]):
        checks.append((f"{label} FID {after['fid']:.2f} at {after['minutes']:g} min <= "
                       f"{1 + FID_SEED_NOISE:g} x {before['fid']:.2f} at {before['minutes']:g} min",
                       after["fid"] <= before["fid"] * (1 + FID_SEED_NOISE)))
    return checks


def main() -> None:
    args = parse_args()
    if args.merge:
        results = args.merged
    elif args.cores:
        results = train_side_by_side(args)
    else:
        results = train_and_score(args)
    report(results, args)


def train_side_by_side(args: argparse.Namespace) -> dict:
    """Every row of `args` once per seed, each in a quality.py process of its own pinned to one
    core, `args.cores` of them started together at a time (the next ones when all have ended),
    so the rows of a wave share the machine's state; their --json files merged as one run."""
    ensure_evaluator()
    jobs = [(row, seed) for seed in args.seeds for row in args.rows]
    cores = sorted(os.sched_getaffinity(0))[:args.cores]
    paths = []
    for start in range(0, len(jobs), args.cores):
        wave = jobs[start:start + args.cores]
        print(f"[{time.strftime('%H:%M:%S')}] started together, one core each: "
              f"{', '.join(f'{row.label} (seed {seed})' for row, seed in wave)} "
              f"(load average {os.getloadavg()[0]:.1f})", flush=True)
        launched = [launch_pinned(row, seed, core, args) for core, (row, seed) in zip(cores, wave)]
        try:
            for process, _ in launched:
                process.wait()
        except BaseException:  # Ctrl-C or a signal: no row keeps training unwatched
            for process, _ in launched:
                process.terminate()
            raise
        for _, path in launched:
            if not os.path.exists(path):
                sys.exit(f"The side-by-side invocation for {path} wrote no results; its output is "
                         f"{path[:-len('.json')]}.log.")
            paths.append(path)
    return merged_results(paths)[1]


def launch_pinned(row: Row, seed: int, core: int, args) -> tuple[subprocess.Popen, str]:
    """(the process, its --json path) of this script training `row` alone with `seed`, pinned
    to `core`, with the run settings of `args`; its output goes beside the JSON as .log."""
    name = os.path.join(args.workdir, "".join(c if c.isalnum() or c in "-_." else "_"
                                              for c in f"{row.label}-seed{seed}"))
    os.makedirs(args.workdir, exist_ok=True)
    if os.path.exists(f"{name}.json"):
        os.remove(f"{name}.json")
    text = f"{row.label}: {shlex.join(row.flags)}" if row.flags else row.label
    command = [sys.executable, os.path.abspath(__file__),
               *(f"--{key}={getattr(args, key)}" for key in SIDE_BY_SIDE_SETTINGS),
               f"--seed={seed}", "--no_reference", "--row", text, f"--workdir={name}",
               f"--json={name}.json", f"--plot={name}.png"]
    with open(f"{name}.log", "w") as log:
        process = subprocess.Popen(command, cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT,
                                   preexec_fn=pinned_to(core))
    return process, f"{name}.json"


def pinned_to(core: int):
    """A `preexec_fn` that pins the child process (and all it starts) to `core`."""
    return lambda: os.sched_setaffinity(0, {core})


def train_and_score(args: argparse.Namespace) -> dict:
    """Every row of `args` trained for the budget and scored at each mark: label: result."""
    ensure_evaluator()
    budget = args.minutes * 60
    results = {}
    for row in args.rows:
        directory = os.path.join(args.workdir, row.label)
        shutil.rmtree(directory, ignore_errors=True)
        os.makedirs(directory)
        print(f"[{time.strftime('%H:%M:%S')}] {row.label}: training for {args.minutes:g} min "
              f"(load average {os.getloadavg()[0]:.1f})", flush=True)
        if not row.flags:
            results[row.label] = baseline_row(row.label, directory, budget, args)
        else:
            record = train_row(row, directory, budget, args.seed,
                               checkpoint_every=args.checkpoint_every if len(args.marks) > 1 else 0,
                               dataset=args.dataset)
            samplers = {row.label: False}  # label: scored with the EMA generator
            if record.pop("keeps_ema"):
                samplers[ema_label(row.label)] = True
            for label, use_ema in samplers.items():
                scored = {**record, **evaluate_row(row, directory, args.eval_samples,
                                                   use_ema=use_ema)}
                scored["timeline"] = gantry_timeline(row, directory, scored, args, use_ema=use_ema)
                del scored["started"]
                results[label] = scored
        for label in (row.label, ema_label(row.label)):
            if label in results:
                results[label]["seed"] = args.seed
                print(f"  {label}: {json.dumps(results[label], sort_keys=True, default=str)}",
                      flush=True)
    return results


def report(results: dict, args: argparse.Namespace) -> None:
    """Prints the tables and checks, draws the figure, writes the JSON; exit 1 on a failed check."""
    title = DATASETS[args.dataset].title
    print(f"\n{title}, {args.minutes:g} min of wall clock per row, {args.eval_samples} samples "
          f"against the test split, domain evaluator\n")
    print(quality_report.format_table(results))
    checks = check_targets(results, args.dataset)
    for description, passed in checks:
        print(f"{'PASS' if passed else 'FAIL'}  {description}")
    if len(args.marks) > 1:
        print(f"\nAt each mark (minutes since launch; the newest state saved by then):\n")
        print(quality_report.format_timeline(results))
    quality_report.plot_timeline(
        results, args.plot, title=f"{title}, {args.eval_samples} samples, domain evaluator: "
                                  f"a {args.minutes:g}-minute budget per row")
    print(f"\nWrote {args.plot}")
    with open(args.json, "w") as file:
        json.dump({**{key: getattr(args, key) for key in RUN_SETTINGS}, "rows": results,
                   "targets": {d: p for d, p in checks}}, file, indent=2, default=str)
    if not all(passed for _, passed in checks):
        sys.exit(1)


if __name__ == "__main__":
    main()
