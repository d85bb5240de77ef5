"""Mode coverage on the 2-D toys (ring8, grid25), averaged over seeds, against a baseline.

Usage, from the repository root:

    python benchmarks/modes.py                       # both toys, 5 seeds, Gantry's toy recipe
    python benchmarks/modes.py --datasets ring8 --seeds 2 --train_cycles 2000   # quicker

For every dataset and seed the script trains with `run.py --mode=train` and scores the run
with `run.py --mode=eval`, which draws 2,500 samples and counts, as the mode-collapse
literature does (VEEGAN, PacGAN), the modes captured (a mode is captured when it is the
nearest mode of at least one high-quality sample) and the fraction of high-quality samples
(within 3 standard deviations of the nearest mode).

`--checkpoint=best` (the default) scores what a user keeps: the run evaluates itself every
`--eval_every` cycles on 2,500 samples and keeps the checkpoint with the highest sum of the
fractions of modes captured and of high-quality samples (what `--eval_every` keeps for a toy,
`trainers.setups.kinds.toy_selection`), and that checkpoint is scored on 2,500 fresh samples
(another noise seed than the one that selected it). `--checkpoint=latest` scores the last
checkpoint instead. Two rows run side by side:

- `gantry`: the `dcgan` preset (non-saturating loss, alternating k=1 updates) with the toy
  recipe in TOY_RECIPE below.
- `baseline`: the same networks, loss and budget with the `dcgan` preset's own image
  settings (Adam beta1 0.5 at 8e-4 for G and 2e-4 for D, batch 32, top-k 0.5 after 5,000
  cycles, 100-d noise), i.e. what a user gets by pointing the image recipe at the toy. The
  toy recipe turns top-k off (`--topk=1`): it was tuned and measured without it.

The targets of the quality issue are checked on the `gantry` row: at least 8/8 (ring8) and
24/25 (grid25) modes and at least 90% high-quality samples, averaged over the seeds; the script
exits with status 1 when one fails.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET_MODES = {"ring8": 8, "grid25": 24}
TARGET_HIGH_QUALITY = 0.9
EVAL_SAMPLES = 2_500
FRESH_NOISE_SEED = 10_000  # + the run's seed: final scores never reuse the selecting noise
# Chosen by the sweeps recorded in benchmarks/results/toys.md: a larger batch and a higher
# learning rate than the image recipe, an EMA generator (10k-image half-life), and a weak R1
# penalty on real points, which keeps every mode once the run is long enough to sharpen them.
TOY_RECIPE = ("--batch_size=256", "--g_lr=1e-3", "--d_lr=1e-3", "--topk=1", "--ema_halflife_kimg=10",
              "--penalty=r1", "--penalty_weight=0.01")
ROWS = {"gantry": ("--setup=dcgan", *TOY_RECIPE), "baseline": ("--setup=dcgan",)}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", default="ring8,grid25")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--train_cycles", type=int, default=30_000)
    parser.add_argument("--rows", default=",".join(ROWS), help=f"any of {', '.join(ROWS)}")
    parser.add_argument("--checkpoint", choices=("best", "latest"), default="best",
                        help="score the best checkpoint by the run's own evaluations, or the last")
    parser.add_argument("--eval_every", type=int, default=500,
                        help="cycles between the run's evaluations (--checkpoint=best)")
    parser.add_argument("--extra", default="",
                        help="run.py flags added to every row's training, e.g. '--pack=2'")
    parser.add_argument("--workdir", default="/tmp/gantry-modes")
    parser.add_argument("--json", default="modes.json")
    args = parser.parse_args()
    args.datasets = [name for name in args.datasets.split(",") if name]
    unknown = sorted(set(args.datasets) - set(TARGET_MODES))
    if unknown:
        parser.error(f"--datasets: unknown {unknown}; use ring8 and/or grid25")
    args.rows = [name for name in args.rows.split(",") if name]
    if set(args.rows) - set(ROWS):
        parser.error(f"--rows: use any of {', '.join(ROWS)}")
    return args


def run_py(*flags: str) -> str:
    """Runs run.py and returns its stdout; any failure stops the benchmark with its output."""
    environment = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    process = subprocess.run([sys.executable, os.path.join(REPO_ROOT, "run.py"), *flags],
                             cwd=REPO_ROOT, capture_output=True, text=True, env=environment)
    if process.returncode:
        sys.exit(f"run.py {' '.join(flags)} failed:\n{process.stderr[-3000:]}")
    return process.stdout


def train_and_score(row: str, dataset: str, seed: int, args) -> dict:
    directory = os.path.join(args.workdir, f"{row}-{dataset}-{seed}")
    shutil.rmtree(directory, ignore_errors=True)
    started = time.time()
    selection = ((f"--eval_every={args.eval_every}", f"--eval_samples={EVAL_SAMPLES}")
                 if args.checkpoint == "best" else ())
    run_py("--mode=train", f"--dataset={dataset}", f"--seed={seed}", f"--logdir={directory}",
           f"--train_cycles={args.train_cycles}", f"--cycles_per_loop={args.eval_every}",
           "--image_every=0", "--histogram_every=0", "--checkpoint_every=0", *selection,
           *ROWS[row], *shlex.split(args.extra))
    seconds = time.time() - started
    scores = json.loads(run_py(
        "--mode=eval", f"--logdir={directory}", f"--checkpoint={args.checkpoint}",
        f"--eval_samples={EVAL_SAMPLES}", f"--seed={FRESH_NOISE_SEED + seed}",
    ).strip().splitlines()[-1])
    return {"modes": scores["modes"], "high_quality": scores["high_quality"], "seconds": seconds}


def summarise(runs: list[dict]) -> dict:
    return {"modes": statistics.mean(r["modes"] for r in runs),
            "high_quality": statistics.mean(r["high_quality"] for r in runs),
            "min_modes": min(r["modes"] for r in runs),
            "seconds": statistics.mean(r["seconds"] for r in runs)}


def main() -> None:
    args = parse_args()
    results: dict[str, dict[str, dict]] = {}
    for dataset in args.datasets:
        for row in args.rows:
            runs = []
            for seed in range(args.seeds):
                runs.append(train_and_score(row, dataset, seed, args))
                print(f"[{time.strftime('%H:%M:%S')}] {row} {dataset} seed {seed}: "
                      f"{json.dumps(runs[-1])}", flush=True)
            results.setdefault(dataset, {})[row] = {"runs": runs, **summarise(runs)}
    print(f"\n{args.train_cycles} cycles, {args.seeds} seeds, {args.checkpoint} checkpoint, "
          f"{EVAL_SAMPLES:,} samples per run\n")
    print(f"{'dataset':>8} {'row':>9} {'modes':>7} {'min':>4} {'high quality':>13} {'s/run':>6}")
    for dataset, rows in results.items():
        for row, summary in rows.items():
            print(f"{dataset:>8} {row:>9} {summary['modes']:>7.2f} {summary['min_modes']:>4} "
                  f"{summary['high_quality']:>13.3f} {summary['seconds']:>6.0f}")
    checks = []
    for dataset, rows in results.items():
        if "gantry" in rows:
            summary = rows["gantry"]
            checks.append((f"{dataset}: {summary['modes']:.2f} modes >= {TARGET_MODES[dataset]}",
                           summary["modes"] >= TARGET_MODES[dataset]))
            checks.append((f"{dataset}: {summary['high_quality']:.3f} high quality >= "
                           f"{TARGET_HIGH_QUALITY}", summary["high_quality"] >= TARGET_HIGH_QUALITY))
    for description, passed in checks:
        print(f"{'PASS' if passed else 'FAIL'}  {description}")
    with open(args.json, "w") as file:
        json.dump({"train_cycles": args.train_cycles, "seeds": args.seeds,
                   "checkpoint": args.checkpoint, "extra": args.extra, "results": results,
                   "targets": dict(checks)}, file, indent=2)
    if not all(passed for _, passed in checks):
        sys.exit(1)


if __name__ == "__main__":
    main()
