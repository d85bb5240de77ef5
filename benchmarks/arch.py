"""`--arch=resnet` against `--arch=dcgan` on Fashion-MNIST at equal wall clock.

Usage, from the repository root:

    python benchmarks/arch.py                       # 4 min per arch at 32 px, writes arch.json
    python benchmarks/arch.py --minutes 2 --setup sngan --flags "--g_width=32 --d_width=32"
    python benchmarks/arch.py --markdown benchmarks/results/arch.md

Both rows run the same `--setup` preset (default sngan: spectral norm, which both discriminators
take) with the same flags, so the networks are the only difference. Each row is
`run.py --mode=train` stopped at the deadline by SIGTERM and scored by `run.py --mode=eval`
with the domain evaluator at that resolution (trained once by `run.py --mode=train_evaluator`
when missing, about two minutes); the rows are trained one after the other, so both meet the
same machine, and `benchmarks.quality` does the training, scoring and table.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import sys
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)

from benchmarks.quality import Row, evaluate_row, run_py, train_row  # noqa: E402
from benchmarks.quality_report import format_table  # noqa: E402
# The families this table compares under one spectrally normalized preset (--arch=r3gan takes
# no spectral norm, so it is not one of them).
ARCHS = ("dcgan", "resnet")



def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=4.0, help="wall-clock budget per arch")
    parser.add_argument("--setup", default="sngan", help="the preset both rows train")
    parser.add_argument("--resolution", type=int, default=32)
    parser.add_argument("--flags", default="", help="extra run.py flags for both rows")
    parser.add_argument("--eval_samples", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", default="/tmp/gantry-arch", help="run directories (replaced)")
    parser.add_argument("--json", default="arch.json", help="where to write the results")
    parser.add_argument("--markdown", default="", help="also write the results as this .md file")
    return parser.parse_args()


def ensure_evaluator(resolution: int) -> None:
    """Trains and caches the Fashion-MNIST domain evaluator at `resolution` unless it exists."""
    from gan import evaluator

    record = os.path.join(evaluator.evaluator_dir("fashion_mnist", resolution=resolution),
                          "evaluator.json")
    if not os.path.exists(record):
        print(f"Training the domain evaluator at {resolution} px (once, about two minutes)...",
              flush=True)
        if run_py("--mode=train_evaluator", "--dataset=fashion_mnist",
                  f"--resolution={resolution}").wait():
            sys.exit("Training the domain evaluator failed; see the output above.")


def cpu_flags() -> str:
    """Which of the CPU features that matter for bfloat16 and AVX-512 this machine has."""
    with open("/proc/cpuinfo") as file:
        present = set(file.read().split())
    return ", ".join(flag for flag in ("avx2", "avx512f", "avx512_bf16", "amx_bf16") if flag in present)


def markdown(args: argparse.Namespace, results: dict, command: str, loads: dict) -> str:
    """The results file: the command, the machine, the table and what it does not say."""
    return "\n".join([
        "# `--arch`: ResNet against DCGAN networks at equal wall clock",
        "",
        f"Command: `{command}`",
        "",
        f"Fashion-MNIST at {args.resolution} px, `--setup={args.setup}` for both rows, "
        f"{args.minutes:g} min of wall clock per row (start-up and tracing included), "
        f"{args.eval_samples} samples scored against the test split by the domain evaluator. "
        f"CPU flags: {cpu_flags()}; {os.cpu_count()} cores. Other load was present on the "
        f"machine (load average at each row's start: "
        f"{', '.join(f'{label} {load:.1f}' for label, load in loads.items())}), so images/s "
        "compare only within this run. Recorded, not a target.",
        "",
        "```",
        format_table(results),
        "```",
        "",
        "img/s counts real images consumed by the discriminator. A short run on CPU favours the "
        "cheaper network: the ResNet does more work per image, so it sees fewer images in the "
        "same time; its quality per image seen is not what this measures.",
        "",
    ])


def main() -> None:
    args = parse_args()
    command = "python benchmarks/arch.py " + shlex.join(sys.argv[1:])
    ensure_evaluator(args.resolution)
    # Loops of 10 cycles: a row stops at the end of the loop running at its deadline, and the
    # ResNet's 50-cycle default loop can take minutes on a CPU.
    flags = (f"--setup={args.setup}", "--dataset=fashion_mnist", f"--resolution={args.resolution}",
             "--cycles_per_loop=10", *shlex.split(args.flags))
    results, loads = {}, {}
    for arch in ARCHS:
        row = Row(arch, (*flags, f"--arch={arch}"))
        directory = os.path.join(args.workdir, arch)
        shutil.rmtree(directory, ignore_errors=True)
        os.makedirs(directory)
        loads[arch] = os.getloadavg()[0]
        print(f"[{time.strftime('%H:%M:%S')}] {arch}: training for {args.minutes:g} min "
              f"(load average {loads[arch]:.1f})", flush=True)
        record = train_row(row, directory, args.minutes * 60, args.seed)
        results[arch] = {**record, **evaluate_row(row, directory, args.eval_samples)}
        print(f"  {json.dumps(results[arch], sort_keys=True, default=str)}", flush=True)
    print(format_table(results))
    with open(args.json, "w") as file:
        json.dump({"command": command, "minutes": args.minutes, "rows": results, "loads": loads},
                  file, indent=2, default=str)
    if args.markdown:
        from datasets import files
        text = markdown(args, results, command, loads).encode()
        files.write_atomically(args.markdown, lambda handle: handle.write(text))


if __name__ == "__main__":
    main()
