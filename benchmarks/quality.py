"""Sample quality of Gantry's presets against two hand-written DCGANs, at equal wall clock.

Usage, from the repository root (the domain evaluator must exist: `python run.py
--mode=train_evaluator`, about two minutes; this script trains it when it is missing):

    python benchmarks/quality.py                          # reference, strong and dcgan, 10 min each
    python benchmarks/quality.py --presets dcgan,lsgan,sngan,r1,cgan,acgan
    python benchmarks/quality.py --minutes 3 --row "dcgan-ema: --gan=dcgan --ema_halflife_kimg=10"

Every row trains in its own process for the same wall-clock budget, counted from the moment the
process starts (imports, data loading and tracing included, as a user would experience it):
the baselines stop themselves at the deadline: "reference", the TensorFlow tutorial's recipe
(`benchmarks/tutorial_dcgan.py`: fused step, Adam 1e-4, batch 256), and "strong", a competent
user's DCGAN (`benchmarks/strong_dcgan.py`: Adam 2e-4 with beta1 0.5, batch 64, one D then one G
update); a Gantry row is `run.py --mode=train` with an unreachable
--train_steps, stopped at the deadline with SIGTERM, which Gantry answers by checkpointing at
the end of the current loop and exiting with code 42 (its preemption path). Each row is then
scored by the same evaluator on the same real test images: `run.py --mode=eval` for Gantry
rows, `trainers.evaluation.scorers.ImageEvaluator` on a baseline's saved samples.

The table lists FID, KID, precision, recall, coverage and class KL (domain evaluator features
and classes), class accuracy for conditional presets, the cycles/steps done and the real
images consumed per second. The targets are checked for the `dcgan` row (FID at most a tenth
of the reference's and a third of the strong baseline's, precision >= 0.65, recall >= 0.75) and
for `cgan` (class accuracy >= 0.8); the script exits with status 1 when a checked target fails.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

REFERENCE, STRONG = "reference", "strong"
BASELINES = {REFERENCE: "tutorial_dcgan.py", STRONG: "strong_dcgan.py"}  # label: recipe script
COLUMNS = ("fid", "kid", "precision", "recall", "coverage", "class_kl", "class_accuracy")
PREEMPTED_EXIT_CODE = 42  # trainers.engine.preemption.RESTART_EXIT_CODE, without importing TensorFlow


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
        raise argparse.ArgumentTypeError(f"--row {text!r}: give a label, e.g. 'dcgan: --gan=dcgan'.")
    if not flags.strip():
        return Row(label) if label in BASELINES else Row(label, (f"--gan={label}",))
    return Row(label, tuple(shlex.split(flags)))


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="wall-clock budget per row")
    parser.add_argument("--presets", default="",
                        help="comma-separated presets to add as rows (with their default flags)")
    parser.add_argument("--row", type=parse_row, action="append", default=[],
                        help="'LABEL: RUN.PY FLAGS' (repeatable); 'reference' is the tutorial, "
                             "'strong' the strong baseline")
    parser.add_argument("--no_reference", action="store_true", help="skip the baseline rows")
    parser.add_argument("--eval_samples", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", default="/tmp/gantry-quality",
                        help="run directories (each row's is replaced)")
    parser.add_argument("--json", default="quality.json", help="where to write the results")
    args = parser.parse_args()
    rows = [] if args.no_reference else [Row(label) for label in BASELINES]
    rows += args.row + [parse_row(name) for name in args.presets.split(",") if name]
    if all(not row.flags for row in rows):
        rows.append(parse_row("dcgan"))
    labels = [row.label for row in rows]
    if len(set(labels)) != len(labels):
        parser.error(f"row labels must be unique: {labels}")
    args.rows = rows
    return args


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


def train_row(row: Row, directory: str, budget: float, seed: int) -> dict:
    """Trains one Gantry row until the deadline; returns steps and images per second."""
    started = time.time()
    log_path = os.path.join(directory, "train.log")
    with open(log_path, "w") as log:
        process = run_py("--mode=train", f"--logdir={directory}", "--train_steps=100000000",
                         "--checkpoint_every=0", "--image_every=0", "--histogram_every=0",
                         f"--seed={seed}", *row.flags, stdout=log, stderr=subprocess.STDOUT)
        try:
            process.wait(timeout=budget)
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=600)
    if process.returncode != PREEMPTED_EXIT_CODE:
        with open(log_path) as log:
            sys.exit(f"Row {row.label!r} did not stop at the deadline as preempted (exit "
                     f"{process.returncode}):\n{log.read()[-3000:]}")
    with open(os.path.join(directory, "config.json")) as file:
        config = json.load(file)
    steps = _last_step(directory)
    images = steps * config["batch_size"] * config["d_steps"]
    return {"steps": steps, "images_per_second": images / (time.time() - started),
            "batch_size": config["batch_size"], "flags": list(row.flags)}


def _last_step(directory: str) -> int:
    from trainers.modes import restore

    return restore.checkpoint_step(restore.latest_checkpoint(directory))


def evaluate_row(row: Row, directory: str, eval_samples: int) -> dict:
    process = run_py("--mode=eval", f"--logdir={directory}", f"--eval_samples={eval_samples}",
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    output, errors = process.communicate()
    if process.returncode:
        sys.exit(f"Evaluating {row.label!r} failed:\n{errors[-3000:]}")
    return json.loads(output.strip().splitlines()[-1])


def baseline_row(label: str, directory: str, budget: float, args) -> dict:
    """Trains a baseline recipe until the deadline and scores its saved samples."""
    started = time.time()
    samples_path = os.path.join(directory, "samples.npy")
    command = [sys.executable, os.path.join(REPO_ROOT, "benchmarks", BASELINES[label]),
               f"--deadline={started + budget}", f"--output={samples_path}",
               f"--num_samples={args.eval_samples}", f"--seed={args.seed}"]
    if subprocess.run(command, cwd=REPO_ROOT).returncode:
        sys.exit(f"The {label} recipe failed; see the output above.")
    elapsed = time.time() - started
    with open(os.path.join(directory, "samples.json")) as file:
        record = json.load(file)
    return {"steps": record["steps"], "images_per_second": record["images"] / elapsed,
            "batch_size": record["batch_size"], "flags": [], **score_samples(samples_path, args)}


def score_samples(path: str, args) -> dict:
    """The metrics `run.py --mode=eval` reports, for saved uint8 samples."""
    import numpy as np

    from gan import scoring
    from trainers.config.fields import Config
    from trainers.evaluation.scorers import ImageEvaluator

    config = Config(mode="eval", dataset="fashion_mnist", eval_samples=args.eval_samples, seed=0)
    scorer = ImageEvaluator(config, config)
    images = np.load(path).astype(np.float32) / 127.5 - 1.0
    return scorer(scoring.replay_sampler(images), latent_shape=(1,))


def check_targets(results: dict) -> list[tuple[str, bool]]:
    """(description, passed) for every target whose rows are present."""
    checks = []
    if REFERENCE in results and "dcgan" in results:
        ours, reference = results["dcgan"], results[REFERENCE]
        checks.append((f"dcgan FID {ours['fid']:.2f} <= reference FID / 10 = "
                       f"{reference['fid'] / 10:.2f}", ours["fid"] <= reference["fid"] / 10))
    if STRONG in results and "dcgan" in results:
        ours, strong = results["dcgan"], results[STRONG]
        checks.append((f"dcgan FID {ours['fid']:.2f} <= strong baseline FID / 3 = "
                       f"{strong['fid'] / 3:.2f}", ours["fid"] <= strong["fid"] / 3))
    if "dcgan" in results:
        checks.append((f"dcgan precision {results['dcgan']['precision']:.3f} >= 0.65",
                       results["dcgan"]["precision"] >= 0.65))
        checks.append((f"dcgan recall {results['dcgan']['recall']:.3f} >= 0.75",
                       results["dcgan"]["recall"] >= 0.75))
    if "cgan" in results and "class_accuracy" in results["cgan"]:
        checks.append((f"cgan class accuracy {results['cgan']['class_accuracy']:.3f} >= 0.8",
                       results["cgan"]["class_accuracy"] >= 0.8))
    return checks


def format_table(results: dict) -> str:
    header = ["row", "steps", "img/s", *COLUMNS]
    lines = [header]
    for label, record in results.items():
        cells = [label, str(record["steps"]), f"{record['images_per_second']:.0f}"]
        cells += [f"{record[key]:.4f}" if key in ("kid",) and key in record else
                  f"{record[key]:.3f}" if key in record else "-" for key in COLUMNS]
        lines.append(cells)
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return "\n".join("  ".join(cell.rjust(width) for cell, width in zip(line, widths))
                     for line in lines)


def main() -> None:
    args = parse_args()
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
            record = train_row(row, directory, budget, args.seed)
            results[row.label] = {**record, **evaluate_row(row, directory, args.eval_samples)}
        print(f"  {json.dumps(results[row.label], sort_keys=True, default=str)}", flush=True)
    print(f"\nFashion-MNIST, {args.minutes:g} min of wall clock per row, {args.eval_samples} "
          f"samples against the test split, domain evaluator\n")
    print(format_table(results))
    checks = check_targets(results)
    for description, passed in checks:
        print(f"{'PASS' if passed else 'FAIL'}  {description}")
    with open(args.json, "w") as file:
        json.dump({"minutes": args.minutes, "eval_samples": args.eval_samples, "rows": results,
                   "targets": {d: p for d, p in checks}}, file, indent=2, default=str)
    if not all(passed for _, passed in checks):
        sys.exit(1)


if __name__ == "__main__":
    main()
