"""The cases of the throughput report: workloads, their data, and how each case is built.

`cases` lists what `throughput.py` measures; `build_case` turns one `Case` into a `Built`:
a function that runs some training cycles (blocking until they are done) and the traced graph
of one compiled call, for FLOP counting. Import this after the CPU has been split into logical
devices (`trainers.engine.distribution.configure_cpu_replicas`), as `throughput.py` does.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import types
from typing import Callable

import keras
import tensorflow as tf

from benchmarks.plain_gan import PlainGan
from datasets import pipeline, registry, toys
import trainers.api  # noqa: F401  declares every flag, in order, before a Config is made
from trainers.config.flags import Config
from trainers.engine.distribution import make_strategy
from trainers.engine.state import TrainingState
from trainers.engine.trainer import Trainer
from trainers.setups import building
from trainers.setups import registry as setups

LOOPS = ("tutorial", "fused", "alternating", "trainer", "simultaneous", "lazy")
# Loops that run Gantry's trainer, and the --update_order each one trains with.
TRAINER_ORDERS = {"trainer": "alternating", "simultaneous": "simultaneous", "lazy": "alternating"}
# "lazy": the trainer with a lazy R1 phase that is due only on cycle 0 (in the warm-up), so the
# timed cycles do exactly the plain trainer's arithmetic plus the lazy phase's per-cycle
# `tf.cond`: what a lazy phase costs the common step.
LAZY_NEVER_DUE = 10 ** 9
SYNTHETIC_EXAMPLES = 2048


@dataclasses.dataclass(frozen=True)
class Workload:
    """A model, its data and the sizes it is timed at (`many` = cycles per compiled call)."""

    title: str
    info: types.SimpleNamespace
    batch_size: int
    width: int | None  # DCGAN base width; None for the MLP pair, whose width is fixed
    many: int
    cycles: int


def workloads(quick: bool) -> dict[str, Workload]:
    """Full sizes: a timed repeat of a case takes 2-5 s for the DCGANs and 0.5-3 s for the toy
    on 2 CPU cores; quick sizes only check that every case runs."""
    def image(side, channels):
        return types.SimpleNamespace(kind="image", shape=(side, side, channels), modes=None)
    points = types.SimpleNamespace(kind="toy", shape=(2,), modes=toys.toy_modes("ring8")[0])
    if quick:
        return {"dcgan28": Workload("DCGAN 28x28x1", image(28, 1), 16, 8, 3, 3),
                "dcgan64": Workload("DCGAN 64x64x3", image(64, 3), 8, 8, 3, 3),
                "toy": Workload("MLP pair, ring8 points", points, 64, None, 20, 40)}
    return {"dcgan28": Workload("DCGAN 28x28x1", image(28, 1), 64, 64, 20, 40),
            "dcgan64": Workload("DCGAN 64x64x3", image(64, 3), 32, 64, 4, 8),
            "toy": Workload("MLP pair, ring8 points", points, 64, None, 100, 600)}


@dataclasses.dataclass(frozen=True)
class Case:
    """One measured configuration of a workload."""

    model: str
    loop: str
    cycles_per_loop: int
    precision: str = "float32"
    xla: bool = False
    replicas: int = 1
    materialised: bool = False


Runner = Callable[[int], int]


@dataclasses.dataclass
class Built:
    """A built case: `run(cycles)` blocks until done and returns the real images consumed;
    `graph()` is the traced graph of one compiled call (for FLOP counting)."""

    run: Runner
    graph: Callable[[], object]
    images_per_cycle: int


def cases(args: argparse.Namespace, specs: dict[str, Workload]) -> tuple[list[Case], list[str]]:
    """The measured cases in table order, and notes on the ones left out."""
    reference = dict(precision=args.precisions[0], xla=args.xla[0], replicas=args.replicas[0])
    axes = {"precision": args.precisions, "xla": args.xla, "replicas": args.replicas}
    if args.combine:
        variations = [dict(zip(axes, values)) for values in itertools.product(*axes.values())]
    else:
        variations = [{**reference, axis: value} for axis, values in axes.items()
                      for value in values]
    variations = [v for i, v in enumerate(variations) if v != reference and v not in variations[:i]]
    selected, notes = [], []
    for model in args.models:
        many = specs[model].many
        listed = [
            Case(model, "tutorial", 1, **reference),
            Case(model, "fused", many, **reference),
            Case(model, "alternating", many, **reference),
            Case(model, "trainer", 1, **reference),
            Case(model, "trainer", many, **reference),
            Case(model, "trainer", many, **reference, materialised=True),
            # `--update_order=simultaneous`: the trainer computing what the fused step computes
            # (D and G updated from one shared generator pass), read against it.
            Case(model, "simultaneous", many, **reference),
            Case(model, "lazy", many, **reference),
        ]
        listed += [Case(model, loop, many, **v) for v in variations for loop in ("fused", "trainer")]
        for case in listed:
            wanted = case.loop in args.loops and (not case.materialised or "input" in args.loops)
            if not wanted:
                continue
            if case.xla and case.replicas > 1 and specs[model].info.kind == "image":
                notes.append(f"{model} {case.loop} with XLA on {case.replicas} replicas skipped: "
                             "synchronized batch norm cannot sit inside an XLA-compiled update.")
                continue
            selected.append(case)
    return selected, notes


def examples_fn(model: str, args: argparse.Namespace, notes: list[str]):
    """``fn() -> unbatched examples`` of a workload, and the name of the data it reads."""
    if model == "toy":
        return lambda: registry.training_examples("ring8", data_dir=None, fashion_mnist_dir=None,
                                                  resolution=None, seed=args.seed), "ring8"
    side, channels = (28, 1) if model == "dcgan28" else (64, 3)
    if model == "dcgan28" and args.data == "fashion_mnist":
        def load():
            return registry.load_split("fashion_mnist", split="train", data_dir=None,
                                       fashion_mnist_dir=None, resolution=None, seed=args.seed)
        try:
            next(iter(load().take(1)))
            return load, "fashion_mnist"
        except (ImportError, OSError, ValueError) as error:
            notes.append(f"Fashion-MNIST is unavailable ({type(error).__name__}: {error}); "
                         "dcgan28 uses synthetic images of the same shape.")

    def synthetic():
        def draw(index):
            return {"x": tf.random.stateless_uniform([side, side, channels], seed=[args.seed, index],
                                                     minval=-1.0, maxval=1.0),
                    "label": index % 10}
        return tf.data.Dataset.range(SYNTHETIC_EXAMPLES).map(draw)

    return synthetic, "synthetic"


def distributed_data(case: Case, strategy, examples, *, global_batch_size: int, seed: int,
                     shuffle_buffer: int):
    """Gantry's input pipeline for the case, or its first batch repeated (pre-materialised)."""
    input_fn = pipeline.training_input_fn(examples, global_batch_size=global_batch_size, seed=seed,
                                          shuffle_buffer=shuffle_buffer)
    if case.materialised:
        real_input_fn = input_fn
        input_fn = lambda context: real_input_fn(context).take(1).cache().repeat()  # noqa: E731
    return strategy.distribute_datasets_from_function(input_fn)


def chunked(call: Callable[[int], None], cycles_per_loop: int, counter: tf.Variable,
            images_per_cycle: int) -> Runner:
    """Runs cycles in calls of at most `cycles_per_loop`, as the controller does, then reads
    `counter` (a variable the calls update) so that timing waits for the work."""
    def run(cycles: int) -> int:
        done = 0
        while done < cycles:
            chunk = min(cycles_per_loop, cycles - done)
            call(chunk)
            done += chunk
        counter.numpy()
        return cycles * images_per_cycle
    return run


def build_case(case: Case, spec: Workload, examples, args: argparse.Namespace) -> Built:
    """Models, optimizers, data and compiled loop of one case, as `Built`."""
    config = setups.resolve(Config(
        setup="dcgan", batch_size=spec.batch_size, cycles_per_loop=case.cycles_per_loop,
        strategy="mirrored" if case.replicas > 1 else "default", cpu_replicas=case.replicas,
        latent_dim=args.latent_dim, g_width=spec.width or Config.g_width,
        d_width=spec.width or Config.d_width,
        precision=case.precision, jit_compile=case.xla, seed=args.seed,
        update_order=TRAINER_ORDERS.get(case.loop, "alternating"),
        **(dict(penalty="r1", penalty_weight=5.0, penalty_every=LAZY_NEVER_DUE)
           if case.loop == "lazy" else {})))
    strategy = make_strategy(config.strategy, cpu_replicas=config.cpu_replicas)
    keras.utils.set_random_seed(args.seed)
    setup = building.build_run(setups.get(config.setup), config, spec.info, strategy)
    data = lambda: distributed_data(  # noqa: E731
        case, strategy, examples, global_batch_size=config.batch_size, seed=args.seed,
        shuffle_buffer=args.shuffle_buffer)
    if case.loop in TRAINER_ORDERS:
        state = TrainingState.create(models=setup.models, optimizers=setup.optimizers)
        trainer = Trainer(strategy=strategy, state=state, phases=setup.phases,
                          make_dataset=lambda done: data(), global_batch_size=config.batch_size,
                          seed=config.seed, jit_compile=case.xla)
        # Real images per timed cycle: phases that run every cycle (the "lazy" case's penalty
        # phase ran only in the warm-up).
        per_cycle = config.batch_size * sum(phase.repeats for phase in setup.phases
                                            if phase.uses_data and phase.every == 1)
        return Built(chunked(trainer.train, case.cycles_per_loop, state.step, per_cycle),
                     trainer.loop_graph, per_cycle)
    gan = PlainGan(generator=setup.models["generator"],
                   discriminator=setup.models["discriminator"], strategy=strategy,
                   precision=case.precision, global_batch_size=config.batch_size,
                   latent_dim=args.latent_dim, jit_compile=case.xla)
    step = gan.alternating_step if case.loop == "alternating" else gan.fused_step
    iterator = iter(data())
    counter = gan.g_optimizer.iterations
    if case.loop == "tutorial":
        one_step = tf.function(lambda batch: strategy.run(step, args=(batch,)))

        def call(cycles: int) -> None:
            for _ in range(cycles):
                one_step(next(iterator))

        first = next(iterator)
        return Built(chunked(call, 1, counter, config.batch_size),
                     lambda: one_step.get_concrete_function(first).graph, config.batch_size)

    @tf.function
    def loop(iterator, cycles):
        for _ in tf.range(cycles):
            strategy.run(step, args=(next(iterator),))

    call = lambda cycles: loop(iterator, tf.constant(cycles, tf.int64))  # noqa: E731
    graph = lambda: loop.get_concrete_function(iterator, tf.constant(1, tf.int64)).graph  # noqa: E731
    return Built(chunked(call, case.cycles_per_loop, counter, config.batch_size), graph,
                 config.batch_size)
