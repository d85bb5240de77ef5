"""Training throughput (real images/second) of Gantry's trainer against a fused tutorial loop.

Usage, from the repository root:

    python benchmarks/throughput.py                           # full run (a few minutes on CPU)
    python benchmarks/throughput.py --steps 20 --repeats 1    # quick smoke run
    python benchmarks/throughput.py --data synthetic --json throughput.json
    python benchmarks/throughput.py --precisions float32,mixed_bfloat16,mixed_float16  # on a GPU

The baseline is the usual tutorial GAN step (as in the TensorFlow DCGAN tutorial): one
`tf.function` that runs the generator once, the discriminator on the real and the fake batch,
records both losses under two gradient tapes and applies both optimizers. It is measured as
the tutorial runs it (a Python loop calling the step once per batch) and with the same step in
a `tf.range` loop inside one `tf.function`, so that it and the trainer pay Python overhead
equally often. Gantry's trainer runs the `dcgan` preset (k=1): a discriminator update then a
generator update per cycle, each with its own generator forward pass, which is the price of
separate, generic phase updates. A third, diagnostic loop does exactly that alternation in
plain code (two tapes in sequence, a `tf.range` loop): the fused loop vs it is the cost of
alternating, it vs the trainer is the cost of the trainer's machinery (seeded noise, metric
accumulators, gradient norms, the strategy calls).

Every case uses the same architecture, batch size, optimizer settings and in-memory data, so
the input pipeline is not what is measured. Each case is built and warmed up (compiled) first;
then the timed repeats go round-robin over the cases, so that load from other processes on the
machine spreads over all of them, and the median of the repeats is reported. Images are the
real images a case consumes (`cycles * batch_size` when k=1). Only the trainer's compiled
inner loop is timed, not the controller's summaries or checkpoints.

To add a case, append a `Case` to the list `cases()` returns: `build(context)` returns a
function that runs a number of cycles, blocks until they are done and returns the real
images it consumed.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import time
import types
from typing import Callable

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)

from trainers.distribution import configure_cpu_replicas, make_strategy  # noqa: E402

configure_cpu_replicas(1)

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

from gan import losses, networks  # noqa: E402
from trainers import phases as phases_lib  # noqa: E402
from trainers import presets  # noqa: E402
from trainers.config import PRECISIONS, Config, resolve_preset, validate  # noqa: E402
from trainers.state import TrainingState  # noqa: E402
from trainers.trainer import Trainer  # noqa: E402

DATA_CHOICES = ("fashion_mnist", "synthetic")
IMAGE_SHAPE = (28, 28, 1)
NUM_CLASSES = 10

Runner = Callable[[int], int]


@dataclasses.dataclass(frozen=True)
class Context:
    """What every case is built from: the parsed flags and the in-memory examples."""

    args: argparse.Namespace
    examples: dict[str, tf.Tensor]

    @property
    def info(self) -> types.SimpleNamespace:
        """The dataset description `presets.build_setup` expects."""
        return types.SimpleNamespace(
            kind="image", shape=tuple(self.examples["x"].shape[1:]), modes=None)

    def dataset(self, batch_size: int) -> tf.data.Dataset:
        """Batches of the cached examples, repeated forever; every case reads this pipeline."""
        return (tf.data.Dataset.from_tensor_slices(self.examples)
                .batch(batch_size, drop_remainder=True)
                .cache()
                .repeat()
                .prefetch(tf.data.AUTOTUNE))


@dataclasses.dataclass(frozen=True)
class Case:
    """One measured configuration.

    `family` names what a cycle computes and how ("fused", "alternating" or "trainer"); each
    case is also compared with the fused case of the same `steps_per_loop` and `precision`
    (the Keras dtype policy its models are built under).
    """

    name: str
    family: str
    steps_per_loop: int
    build: Callable[[Context, str], Runner]
    precision: str = "float32"


def load_examples(args: argparse.Namespace) -> tuple[dict[str, tf.Tensor], str]:
    """The first `--num_examples` training examples as in-memory tensors, and their source.

    Falls back to synthetic data (with a printed note) when the Fashion-MNIST loader cannot be
    imported or cannot read the data.
    """
    if args.data == "fashion_mnist":
        try:
            from datasets import registry
            split = registry.load_split(
                "fashion_mnist", split="train", data_dir=None, fashion_mnist_dir=None,
                resolution=None, seed=0)
            examples = next(iter(split.take(args.num_examples).batch(args.num_examples)))
            return {"x": tf.cast(examples["x"], tf.float32),
                    "label": tf.cast(examples["label"], tf.int64)}, "fashion_mnist"
        except (ImportError, OSError, ValueError) as error:
            print(f"Note: Fashion-MNIST is unavailable ({type(error).__name__}: {error}); "
                  "using synthetic data of the same shape.", flush=True)
    images = tf.random.stateless_uniform(
        [args.num_examples, *IMAGE_SHAPE], seed=[0, 1], minval=-1.0, maxval=1.0)
    labels = tf.random.stateless_uniform(
        [args.num_examples], seed=[0, 2], maxval=NUM_CLASSES, dtype=tf.int64)
    return {"x": images, "label": labels}, "synthetic"


@dataclasses.dataclass(frozen=True)
class _PlainGan:
    """Models, loss and optimizers as the tutorial builds them, shared by the plain loops."""

    generator: keras.Model
    discriminator: keras.Model
    loss: losses.AdversarialLoss
    g_optimizer: keras.optimizers.Optimizer
    d_optimizer: keras.optimizers.Optimizer
    batch_size: int
    latent_dim: int

    @classmethod
    def build(cls, context: Context, precision: str) -> "_PlainGan":
        args = context.args
        height, _, channels = context.info.shape
        with presets.dtype_policy(precision):
            generator = networks.dcgan_generator(
                resolution=height, channels=channels, latent_dim=args.latent_dim, width=args.g_width)
            discriminator = networks.dcgan_discriminator(
                resolution=height, channels=channels, width=args.d_width)
        g_optimizer = keras.optimizers.Adam(2e-4, beta_1=0.5)
        d_optimizer = keras.optimizers.Adam(2e-4, beta_1=0.5)
        g_optimizer.build(generator.trainable_variables)
        d_optimizer.build(discriminator.trainable_variables)
        return cls(generator=generator, discriminator=discriminator,
                   loss=losses.get_loss("non_saturating"), g_optimizer=g_optimizer,
                   d_optimizer=d_optimizer, batch_size=args.batch_size, latent_dim=args.latent_dim)

    def fake(self) -> tf.Tensor:
        return self.generator(
            tf.random.normal([self.batch_size, self.latent_dim]), training=True)

    def fused_step(self, batch) -> None:
        """The tutorial's step: one generator forward shared by both tapes and both updates."""
        generator, discriminator = self.generator, self.discriminator
        with tf.GradientTape() as g_tape, tf.GradientTape() as d_tape:
            fake = self.fake()
            real_logits = discriminator(batch["x"], training=True)
            fake_logits = discriminator(fake, training=True)
            g_loss = tf.reduce_mean(self.loss.generator(fake_logits))
            d_loss = tf.reduce_mean(self.loss.discriminator(real_logits, fake_logits))
        g_gradients = g_tape.gradient(g_loss, generator.trainable_variables)
        d_gradients = d_tape.gradient(d_loss, discriminator.trainable_variables)
        self.g_optimizer.apply_gradients(zip(g_gradients, generator.trainable_variables))
        self.d_optimizer.apply_gradients(zip(d_gradients, discriminator.trainable_variables))

    def alternating_step(self, batch) -> None:
        """What the trainer computes, written plainly: a discriminator update, then a
        generator update against the updated discriminator, each with its own fake batch."""
        generator, discriminator = self.generator, self.discriminator
        with tf.GradientTape() as tape:
            fake = self.fake()
            d_loss = tf.reduce_mean(self.loss.discriminator(
                discriminator(batch["x"], training=True), discriminator(fake, training=True)))
        d_gradients = tape.gradient(d_loss, discriminator.trainable_variables)
        self.d_optimizer.apply_gradients(zip(d_gradients, discriminator.trainable_variables))
        with tf.GradientTape() as tape:
            g_loss = tf.reduce_mean(
                self.loss.generator(discriminator(self.fake(), training=True)))
        g_gradients = tape.gradient(g_loss, generator.trainable_variables)
        self.g_optimizer.apply_gradients(zip(g_gradients, generator.trainable_variables))


def build_fused_python_loop(context: Context, precision: str) -> Runner:
    """The tutorial as written: a Python loop calling a compiled step once per batch."""
    gan = _PlainGan.build(context, precision)
    compiled = tf.function(gan.fused_step)
    iterator = iter(context.dataset(context.args.batch_size))

    def run(cycles: int) -> int:
        for _ in range(cycles):
            compiled(next(iterator))
        gan.g_optimizer.iterations.numpy()
        return cycles * context.args.batch_size

    return run


def _compiled_loop(context: Context, step: Callable[[dict], None],
                   counter: tf.Variable) -> Runner:
    """`step` inside a `tf.range` loop of up to `--steps_per_loop` steps per call."""
    iterator = iter(context.dataset(context.args.batch_size))

    @tf.function
    def loop(iterator, cycles):
        for _ in tf.range(cycles):
            step(next(iterator))

    return _chunked(lambda n: loop(iterator, tf.constant(n, tf.int64)),
                    context.args.steps_per_loop, counter,
                    images_per_cycle=context.args.batch_size)


def build_fused_compiled_loop(context: Context, precision: str) -> Runner:
    """The tutorial step in a compiled loop: the fair baseline for the trainer's loop."""
    gan = _PlainGan.build(context, precision)
    return _compiled_loop(context, gan.fused_step, gan.g_optimizer.iterations)


def build_alternating_compiled_loop(context: Context, precision: str) -> Runner:
    """The trainer's arithmetic without the trainer, to split its gap to the fused step into
    the cost of alternation (a second generator forward) and the trainer's own overhead."""
    gan = _PlainGan.build(context, precision)
    return _compiled_loop(context, gan.alternating_step, gan.g_optimizer.iterations)


def _chunked(call: Callable[[int], None], steps_per_loop: int, counter: tf.Variable, *,
             images_per_cycle: int) -> Runner:
    """Runs cycles in calls of at most `steps_per_loop` cycles each, as the controller does,
    then reads `counter` (a variable the calls update) so that timing waits for the work."""

    def run(cycles: int) -> int:
        done = 0
        while done < cycles:
            chunk = min(steps_per_loop, cycles - done)
            call(chunk)
            done += chunk
        counter.numpy()
        return cycles * images_per_cycle

    return run


def trainer_builder(steps_per_loop: int) -> Callable[[Context, str], Runner]:
    """Gantry's trainer on the `dcgan` preset, called with `steps_per_loop` cycles at a time."""

    def build(context: Context, precision: str) -> Runner:
        args = context.args
        config = validate(resolve_preset(Config(
            gan="dcgan", batch_size=args.batch_size, steps_per_loop=steps_per_loop,
            strategy="default", latent_dim=args.latent_dim, g_width=args.g_width,
            d_width=args.d_width, precision=precision)))
        strategy = make_strategy(config.strategy)
        setup = presets.build_setup(config, context.info, strategy)
        state = TrainingState.create(models=setup.models, optimizers=setup.optimizers)

        def make_dataset(global_batches_done: int):
            def input_fn(input_context: tf.distribute.InputContext) -> tf.data.Dataset:
                per_replica = input_context.get_per_replica_batch_size(config.batch_size)
                return context.dataset(per_replica)
            return strategy.distribute_datasets_from_function(input_fn)

        trainer = Trainer(strategy=strategy, state=state, phases=setup.phases,
                          make_dataset=make_dataset, global_batch_size=config.batch_size,
                          seed=config.seed)
        images_per_cycle = phases_lib.batches_after(setup.phases, 1) * config.batch_size
        return _chunked(trainer.train, steps_per_loop, state.step,
                        images_per_cycle=images_per_cycle)

    return build


def cases(args: argparse.Namespace) -> list[Case]:
    """The measured cases, in table order; the first is the baseline of the relative column."""
    spl = args.steps_per_loop
    float32 = [
        Case("fused step, Python loop (tutorial)", "fused", 1, build_fused_python_loop),
        Case("fused step, tf.range loop", "fused", spl, build_fused_compiled_loop),
        Case("alternating D then G step, tf.range loop", "alternating", spl,
             build_alternating_compiled_loop),
        Case("gantry trainer, dcgan (k=1)", "trainer", 1, trainer_builder(1)),
        Case("gantry trainer, dcgan (k=1)", "trainer", spl, trainer_builder(spl)),
    ]
    mixed = [
        Case(name, family, spl, build, precision)
        for precision in args.precisions if precision != "float32"
        for name, family, build in (
            ("fused step, tf.range loop", "fused", build_fused_compiled_loop),
            ("gantry trainer, dcgan (k=1)", "trainer", trainer_builder(spl)))
    ]
    return float32 + mixed


def measure(case_list: list[Case], context: Context) -> list[dict]:
    """Builds and warms up every case, then times `--repeats` rounds of `--steps` cycles.

    Warm-up calls are short: every compiled loop takes its cycle count as a tensor, so the
    first call traces the same function that the timed calls of `steps_per_loop` cycles run.
    """
    args = context.args
    runners = []
    for case in case_list:
        print(f"Building and compiling: {case.name}, steps/loop {case.steps_per_loop}", flush=True)
        keras.utils.set_random_seed(args.seed)
        runner = case.build(context, case.precision)
        runner(args.warmup_steps)
        runners.append(runner)
    timings: list[list[tuple[int, float]]] = [[] for _ in case_list]
    for repeat in range(args.repeats):
        print(f"Timing round {repeat + 1}/{args.repeats}", flush=True)
        for runner, record in zip(runners, timings):
            start = time.perf_counter()
            images = runner(args.steps)
            record.append((images, time.perf_counter() - start))
    results = []
    for case, record in zip(case_list, timings):
        rates = [images / seconds for images, seconds in record]
        results.append({
            "name": case.name, "family": case.family, "steps_per_loop": case.steps_per_loop,
            "precision": case.precision,
            "images_per_second": statistics.median(rates),
            "repeat_images_per_second": rates,
            "repeat_seconds": [seconds for _, seconds in record],
            "images_per_repeat": record[0][0]})
    _add_ratios(results)
    return results


def _add_ratios(results: list[dict]) -> None:
    """Adds the speed relative to the first case and to the fused case of equal steps/loop and
    precision."""
    baseline = results[0]["images_per_second"]
    fused = {(r["steps_per_loop"], r["precision"]): r["images_per_second"]
             for r in results if r["family"] == "fused"}
    for result in results:
        rate = result["images_per_second"]
        result["relative_to_baseline"] = rate / baseline
        same = fused.get((result["steps_per_loop"], result["precision"]))
        result["relative_to_fused_same_loop"] = rate / same if same else None


def markdown_table(results: list[dict]) -> str:
    """The results as a markdown table."""
    lines = ["| case | precision | steps/loop | images/s | relative to fused baseline "
             "| relative to fused, same steps/loop and precision |",
             "|---|---|---:|---:|---:|---:|"]
    for r in results:
        same = r["relative_to_fused_same_loop"]
        lines.append(
            f"| {r['name']} | {r['precision']} | {r['steps_per_loop']} | {r['images_per_second']:.1f} "
            f"| {r['relative_to_baseline']:.2f}x | {'-' if same is None else f'{same:.2f}x'} |")
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", choices=DATA_CHOICES, default="fashion_mnist")
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--steps", type=int, default=200, help="timed cycles per repeat")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--warmup_steps", type=int, default=5,
                        help="untimed cycles per case first (compiles its functions)")
    parser.add_argument("--steps_per_loop", type=int, default=50,
                        help="cycles per compiled call of the looped cases")
    parser.add_argument("--g_width", type=int, default=64)
    parser.add_argument("--d_width", type=int, default=64)
    parser.add_argument("--latent_dim", type=int, default=100)
    parser.add_argument("--num_examples", type=int, default=10_000,
                        help="examples held in memory and cycled through")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--precisions", type=lambda text: text.split(","),
                        default=["float32", "mixed_bfloat16"],
                        help="comma-separated dtype policies; each besides float32 adds a fused "
                             "and a trainer case (mixed_float16 is for GPUs)")
    parser.add_argument("--json", default=None, metavar="PATH", help="also write results here")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.precisions) - set(PRECISIONS))
    if unknown:
        parser.error(f"--precisions has unknown {unknown}: use {', '.join(PRECISIONS)}.")
    for flag in ("batch_size", "steps", "repeats", "warmup_steps", "steps_per_loop",
                 "g_width", "d_width", "latent_dim"):
        if getattr(args, flag) < 1:
            parser.error(f"--{flag}={getattr(args, flag)!r} is invalid: use 1 or more.")
    if args.num_examples < args.batch_size:
        parser.error(f"--num_examples={args.num_examples!r} is smaller than --batch_size="
                     f"{args.batch_size}: hold at least one batch in memory.")
    if args.json and not os.path.isdir(os.path.dirname(os.path.abspath(args.json))):
        parser.error(f"--json={args.json!r}: its directory does not exist; create it first.")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    examples, source = load_examples(args)
    context = Context(args=args, examples=examples)
    results = measure(cases(args), context)
    settings = {
        **vars(args), "data": source, "num_examples": int(examples["x"].shape[0]),
        "tensorflow": tf.__version__, "keras": keras.__version__, "cpu_count": os.cpu_count(),
        "devices": [d.name for d in tf.config.list_logical_devices()]}
    print()
    print(f"Data {source}, batch {args.batch_size}, {args.steps} timed cycles x "
          f"{args.repeats} repeats (median), TF {tf.__version__}, "
          f"devices {', '.join(settings['devices'])}.")
    print()
    print(markdown_table(results))
    if args.json:
        with open(args.json, "w") as file:
            json.dump({"settings": settings, "results": results}, file, indent=2)
        print(f"\nWrote {args.json}")


if __name__ == "__main__":
    main()
