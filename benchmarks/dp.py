"""Sample quality against privacy: a differentially private dcgan at noise multipliers giving
epsilon about 1 and 10, against the non-private run, all at the same number of cycles.

Usage, from the repository root (the Fashion-MNIST domain evaluator must exist: `python run.py
--mode=train_evaluator`):

    python benchmarks/dp.py                                # 2000 cycles, epsilon 1 and 10
    python benchmarks/dp.py --steps 300 --epsilons 1,10 --flags="--dp_microbatches=8"

For each target epsilon the noise multiplier is calibrated with `dp-accounting` (the RDP
accountant `engine.privacy` reports with) for the run's sampling rate (batch / 60,000), its
discriminator updates and delta = 1/60,000. Every row is `run.py --mode=train` for --steps
cycles, then `run.py --mode=eval` (FID with the domain evaluator); the table gives FID,
precision, recall, the epsilon the run reported and its seconds of training.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = 60_000  # Fashion-MNIST's training split
BATCH = 32  # the dcgan preset's


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=2000, help="cycles of every row")
    parser.add_argument("--epsilons", default="1,10", help="target epsilons of the private rows")
    parser.add_argument("--l2_clip", type=float, default=1.0)
    parser.add_argument("--eval_samples", type=int, default=2000)
    parser.add_argument("--flags", default="", help="extra run.py flags for every row")
    parser.add_argument("--workdir", default=None, help="where the runs go (default: a temp dir)")
    return parser.parse_args()


def noise_for(epsilon: float, steps: int) -> float:
    """The noise multiplier whose `steps` Poisson-sampled Gaussian updates spend `epsilon`."""
    import dp_accounting

    def event(noise):
        return dp_accounting.SelfComposedDpEvent(dp_accounting.PoissonSampledDpEvent(
            BATCH / EXAMPLES, dp_accounting.GaussianDpEvent(noise)), steps)

    return dp_accounting.calibrate_dp_mechanism(
        dp_accounting.rdp.RdpAccountant, event, epsilon, 1 / EXAMPLES,
        dp_accounting.LowerEndpointAndGuess(0.1, 1.0))


def run_py(*flags: str) -> str:
    result = subprocess.run([sys.executable, os.path.join(REPO_ROOT, "run.py"), *flags],
                            cwd=REPO_ROOT, capture_output=True, text=True)
    if result.returncode:
        sys.exit(f"run.py {' '.join(flags)} failed:\n{result.stderr[-3000:]}")
    return result.stdout


def row(label: str, flags: list[str], args, workdir: str) -> dict:
    logdir = os.path.join(workdir, label)
    started = time.time()
    run_py("--setup=dcgan", f"--logdir={logdir}", f"--train_cycles={args.steps}", "--image_every=0",
           "--histogram_every=0", "--checkpoint_every=0", *shlex.split(args.flags), *flags)
    seconds = time.time() - started
    results = json.loads(run_py("--mode=eval", f"--logdir={logdir}",
                                f"--eval_samples={args.eval_samples}").strip().splitlines()[-1])
    privacy = results.get("privacy") or {}
    return {"label": label, "fid": results["fid_domain"], "precision": results["precision_domain"],
            "recall": results["recall_domain"], "epsilon": privacy.get("epsilon", float("inf")),
            "noise_multiplier": privacy.get("noise_multiplier", 0.0), "seconds": seconds}


def main() -> None:
    args = parse_args()
    workdir = args.workdir or tempfile.mkdtemp(prefix="gantry-dp-")
    rows = [row("non-private", [], args, workdir)]
    for target in (float(text) for text in args.epsilons.split(",")):
        noise = noise_for(target, args.steps)
        rows.append(row(f"dp-eps{target:g}", [f"--dp_l2_clip={args.l2_clip}",
                                             f"--dp_noise_multiplier={noise:.4f}"], args, workdir))
    print(f"{args.steps} cycles, batch {BATCH}, --eval_samples={args.eval_samples}, "
          f"flags: {args.flags or '(none)'}\n")
    print("| run | noise multiplier | epsilon | FID | precision | recall | train s |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['label']} | {r['noise_multiplier']:.4g} | {r['epsilon']:.3g} | "
              f"{r['fid']:.2f} | {r['precision']:.3f} | {r['recall']:.3f} | {r['seconds']:.0f} |")


if __name__ == "__main__":
    main()
