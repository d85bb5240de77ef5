"""Cycles/s of `--setup=wgan_gp` with its gradient penalty eager and lazy, side by side.

Usage, from the repository root:

    python benchmarks/lazy_penalty.py --every 1,4,16 --repeats 5

Each interval N is Gantry's trainer on the wgan_gp loss and penalty with the paper's k = 5
critic updates per cycle (`benchmark_config`, fixed whatever the preset's k) at the DCGAN 28 px
sizes of `throughput.py` (batch 64, width 64, Fashion-MNIST through Gantry's input pipeline),
float32 on every CPU, no XLA, one replica. Every case is built and warmed up first; the
timed repeats then go round-robin over the cases (so other processes' load spreads over all of
them) and each covers a multiple of every N, so it holds the same share of penalty cycles as a
long run. Reported: the median cycles/s and its ratio to N = 1.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)

import keras  # noqa: E402

from benchmarks.throughput_cases import (Case, chunked, distributed_data, examples_fn,  # noqa: E402
                                         workloads)
import trainers.api  # noqa: E402,F401  declares every flag, in order, before a Config is made
from trainers.config.flags import Config  # noqa: E402
from trainers.engine.distribution import make_strategy  # noqa: E402
from trainers.engine.state import TrainingState  # noqa: E402
from trainers.engine.trainer import Trainer  # noqa: E402
from trainers.setups import building  # noqa: E402
from trainers.setups import registry as setups  # noqa: E402

MODEL = "dcgan28"
# The penalty's cost grows with the critic updates it runs in; the figures in lazy_phase.md are
# for the paper's five, so the benchmark keeps them when the preset trains fewer.
CRITIC_UPDATES = 5


def benchmark_config(every: int, cycles: int, seed: int) -> Config:
    """The wgan_gp run timed at --penalty_every=`every`: float32 (not the default auto, which is
    bfloat16 where native) and `CRITIC_UPDATES` critic updates, so that its figures compare
    across CPUs and preset versions."""
    spec = workloads(quick=False)[MODEL]
    return setups.resolve(Config(setup="wgan_gp", penalty_every=every, d_updates=CRITIC_UPDATES,
                                 precision="float32", batch_size=spec.batch_size,
                                 g_width=spec.width, d_width=spec.width, cycles_per_loop=cycles,
                                 seed=seed))


def build(every: int, args: argparse.Namespace, examples):
    """``run(cycles)`` of the wgan_gp trainer with --penalty_every=`every`."""
    spec = workloads(quick=False)[MODEL]
    config = benchmark_config(every, args.cycles, args.seed)
    strategy = make_strategy("default")
    keras.utils.set_random_seed(args.seed)
    setup = building.build_run(setups.get(config.setup), config, spec.info, strategy)
    state = TrainingState.create(models=setup.models, optimizers=setup.optimizers)
    data = distributed_data(Case(MODEL, "trainer", args.cycles), strategy, examples,
                            global_batch_size=config.batch_size, seed=args.seed,
                            shuffle_buffer=10_000)
    trainer = Trainer(strategy=strategy, state=state, phases=setup.phases,
                      make_dataset=lambda done: data, global_batch_size=config.batch_size,
                      seed=config.seed)
    return chunked(trainer.train, args.cycles, state.step, config.batch_size)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--every", default="1,4,16", help="comma-separated --penalty_every values")
    parser.add_argument("--repeats", type=int, default=5, help="timed rounds")
    parser.add_argument("--cycles", type=int, default=16,
                        help="cycles per timed repeat (one compiled call); a multiple of every N")
    parser.add_argument("--data", choices=("fashion_mnist", "synthetic"), default="fashion_mnist")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    intervals = [int(value) for value in args.every.split(",")]
    if any(args.cycles % every for every in intervals):
        parser.error(f"--cycles={args.cycles} must be a multiple of every --every value.")
    notes: list[str] = []
    examples, source = examples_fn(MODEL, args, notes)
    runs = {}
    for every in intervals:
        runs[every] = build(every, args, examples)
        runs[every](args.cycles)  # trace, compile, fill the pipeline
    for run in runs.values():
        run(args.cycles)  # building re-seeds, which clears TensorFlow's function caches
    speeds = {every: [] for every in intervals}
    for _ in range(args.repeats):
        for every, run in runs.items():
            start = time.perf_counter()
            run(args.cycles)
            speeds[every].append(args.cycles / (time.perf_counter() - start))
    print(f"data: {source}; {args.repeats} rounds of {args.cycles} cycles", *notes, sep="\n")
    print("| --penalty_every | cycles/s (median) | vs 1 |\n| ---: | ---: | ---: |")
    base = statistics.median(speeds[intervals[0]])
    for every in intervals:
        median = statistics.median(speeds[every])
        print(f"| {every} | {median:.2f} | {median / base:.1%} |")


if __name__ == "__main__":
    main()
