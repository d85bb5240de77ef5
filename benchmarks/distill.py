"""Knowledge distillation against hard labels only, at equal steps: what the teacher adds.

Usage, from the repository root (the cached Fashion-MNIST domain evaluator is the teacher;
train it first with `python run.py --mode=train_evaluator`):

    python benchmarks/distill.py                                   # 3 seeds x 2 variants
    python benchmarks/distill.py --steps 500 --seeds 0 --json out.json
    python benchmarks/distill.py --variants --dfad_minutes 3      # the DFAD row only

Each variant trains `--setup=distill` through the Python API with the same student, steps,
batch, learning rate and seeds: "hard labels" (w_hard 1, w_soft 0) and "KD" (w_hard 0.5,
w_soft 0.5, T 4). It prints the student's test accuracy on the first `--eval_samples` test
images per seed, their mean, and the teacher's accuracy and agreement, as `--mode=eval`
reports them. The DFAD row trains `--setup=dfad` (no training image read) against the same
teacher for `--dfad_minutes` of wall time (its first seed; one run with `--train_time`) and
reports the same numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

from trainers import api  # noqa: E402

VARIANTS = {"hard labels": {"hard_weight": 1.0, "soft_weight": 0.0},
            "KD": {"hard_weight": 0.5, "soft_weight": 0.5, "temperature": 4.0}}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=1000, help="training cycles per run")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--student_width", type=int, default=4)
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--eval_samples", type=int, default=10_000)
    parser.add_argument("--evaluator_dir", default=None)
    parser.add_argument("--variants", nargs="*", choices=list(VARIANTS), default=list(VARIANTS))
    parser.add_argument("--dfad_minutes", type=float, default=30.0,
                        help="wall time of the DFAD row (0: no DFAD row)")
    parser.add_argument("--json", default=None, help="also write the results here")
    return parser.parse_args()


def row(variant: str, seed: int, seconds: float, metrics: dict, **extra) -> dict:
    """One result line: the run's student and teacher accuracies and agreement."""
    return {"variant": variant, "seed": seed, "seconds": round(seconds, 1), **extra,
            **{key: metrics[key] for key in ("student_accuracy", "teacher_accuracy", "agreement",
                                             "num_samples")}}


def train_dfad(args: argparse.Namespace, logdir: str) -> dict:
    """`--setup=dfad` for `--dfad_minutes` of wall time (`--train_time`; no step limit)."""
    seed, start = args.seeds[0], time.perf_counter()
    trained = api.train(api.config(
        setup="dfad", logdir=logdir, seed=seed, train_time=f"{60 * args.dfad_minutes:g}s",
        cycles_per_loop=100, checkpoint_every=0, image_every=0, histogram_every=0,
        batch_size=args.batch_size, student_width=args.student_width,
        evaluator_dir=args.evaluator_dir))
    seconds, cycles = time.perf_counter() - start, trained.step
    metrics = api.evaluate(logdir, eval_samples=args.eval_samples, evaluator_dir=args.evaluator_dir)
    return row(f"DFAD ({args.dfad_minutes:g} min)", seed, seconds, metrics, cycles=cycles)


def main() -> int:
    args = parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as root:
        for name in args.variants:
            flags = VARIANTS[name]
            for seed in args.seeds:
                logdir = os.path.join(root, f"{name.replace(' ', '_')}-{seed}")
                config = api.config(setup="distill", logdir=logdir, seed=seed, train_cycles=args.steps,
                                    cycles_per_loop=100, checkpoint_every=0, image_every=0,
                                    histogram_every=0, batch_size=args.batch_size,
                                    student_width=args.student_width,
                                    evaluator_dir=args.evaluator_dir, **flags)
                start = time.perf_counter()
                api.train(config)
                seconds = time.perf_counter() - start
                metrics = api.evaluate(logdir, eval_samples=args.eval_samples,
                                       evaluator_dir=args.evaluator_dir)
                rows.append(row(name, seed, seconds, metrics))
                print(json.dumps(rows[-1]), flush=True)
        if args.dfad_minutes > 0:
            rows.append(train_dfad(args, os.path.join(root, "dfad")))
            print(json.dumps(rows[-1]), flush=True)
    print(f"\n{args.steps} cycles per KD variant, batch {args.batch_size}, "
          f"student width {args.student_width}, "
          f"{rows[0]['num_samples']} test images, teacher accuracy {rows[0]['teacher_accuracy']:.4f}\n")
    print("| variant | student accuracy per seed | mean | agreement (mean) | seconds per run |")
    print("| --- | --- | --- | --- | --- |")
    for name in dict.fromkeys(result["variant"] for result in rows):
        mine = [result for result in rows if result["variant"] == name]
        accuracies = [result["student_accuracy"] for result in mine]
        cycles = f" ({mine[0]['cycles']} cycles)" if "cycles" in mine[0] else ""
        print(f"| {name}{cycles} | {', '.join(f'{a:.4f}' for a in accuracies)} | {np.mean(accuracies):.4f} "
              f"| {np.mean([result['agreement'] for result in mine]):.4f} "
              f"| {np.mean([result['seconds'] for result in mine]):.0f} |")
    if args.json:
        with open(args.json, "w") as file:
            json.dump(rows, file, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
