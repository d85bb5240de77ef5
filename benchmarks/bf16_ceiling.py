"""How much faster can bfloat16 make the dcgan preset on this CPU? The convolutions alone, timed.

For each Conv2D and Conv2DTranspose layer of the dcgan preset's networks (28 px, width 64, as
`gan.networks` builds them), at the batch sizes asked for (the preset trains at 32), this times
the three kernels a training cycle runs for it, each as one oneDNN op in a compiled function:
the forward pass, the gradient with respect to its input ("backward-input") and with respect to
its kernel ("backward-filter"), in float32 and in bfloat16 (what mixed_bfloat16 runs: inputs and
kernels cast to bfloat16), interleaved over --repeats rounds of --count calls in a compiled
loop, medians, the loop's own cost per iteration subtracted. A Conv2DTranspose's forward pass is
a Conv2DBackpropInput op and its input gradient a Conv2D op, so each row names the op that runs.

Each kernel is counted as often as an alternating cycle (one discriminator update, then one
generator update) runs it: the discriminator's convolutions run forward 3 times (real and fake
in D's update, fake in G's), their kernel gradients twice (D's update), their input gradients
twice in D's update (not for the first layer: the images need none) and once in G's (to reach
the generator); the generator's transposed convolutions run forward twice (both updates) and
back once each way (G's update). That is 22 convolution ops per cycle, as the cycle profile
counts (`cycle_profile.py`).

The ceiling: if every non-convolution op cost the same in bfloat16 as in float32 and the
convolutions took their measured bfloat16 time, a cycle would take (1 - s) + s / r of its
float32 time, where s is the convolutions' share of a float32 cycle (--conv_share: 0.745, the
quiet-machine profile of the dcgan preset in float32 in `results/throughput.md`: 50.9 of 68.3 ms
op time) and r the per-cycle float32 / bfloat16 ratio of the convolutions measured here: the
whole-cycle bfloat16 speed-up cannot exceed 1 / ((1 - s) + s / r) unless the other ops get
faster in bfloat16 too (they do not: casts are added and CPUs have no bfloat16 elementwise
arithmetic).

    .venv/bin/python benchmarks/bf16_ceiling.py                  # about 2 minutes on 2 cores
    .venv/bin/python benchmarks/bf16_ceiling.py --batches 32 --repeats 11
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

from benchmarks.cycle_profile import cpu_flags, load_average  # noqa: E402
from gan import networks  # noqa: E402

LATENT_DIM = 100
DTYPES = {"float32": tf.float32, "bfloat16": tf.bfloat16}


@dataclasses.dataclass(frozen=True)
class ConvLayer:
    """One convolution of the preset's networks: its model, name, kind and shapes (NHWC input
    without the batch, HWIO kernel as Keras stores it), strides and padding."""

    model: str
    name: str
    transposed: bool
    input_shape: tuple[int, ...]
    output_shape: tuple[int, ...]
    kernel_shape: tuple[int, ...]
    strides: tuple[int, int]
    padding: str

    def counts(self, first: bool) -> dict[str, int]:
        """How often an alternating cycle runs each kernel of this layer (module docstring)."""
        if self.transposed:
            return {"forward": 2, "backward-input": 1, "backward-filter": 1}
        return {"forward": 3, "backward-input": 1 if first else 3, "backward-filter": 2}


def preset_convolutions() -> list[ConvLayer]:
    """The Conv2D and Conv2DTranspose layers of the dcgan preset's generator and discriminator
    at 28 px (float32: shapes only)."""
    keras.mixed_precision.set_global_policy("float32")
    models = {"generator": networks.dcgan_generator(resolution=28, channels=1,
                                                    latent_dim=LATENT_DIM),
              "discriminator": networks.dcgan_discriminator(resolution=28, channels=1)}
    layers = []
    for model_name, model in models.items():
        for layer in model.layers:
            if not isinstance(layer, (keras.layers.Conv2D, keras.layers.Conv2DTranspose)):
                continue
            layers.append(ConvLayer(
                model_name, layer.name, isinstance(layer, keras.layers.Conv2DTranspose),
                tuple(layer.input.shape[1:]), tuple(layer.output.shape[1:]),
                tuple(layer.kernel.shape), tuple(layer.strides), layer.padding.upper()))
    return layers


def kernels(layer: ConvLayer, batch: int, dtype: tf.DType) -> dict[str, tuple[str, object]]:
    """{kernel: (the op that runs, ``run(count)``: a compiled function running it `count` times
    one after the other)}."""
    x = tf.cast(tf.random.normal([batch, *layer.input_shape]), dtype)
    y = tf.cast(tf.random.normal([batch, *layer.output_shape]), dtype)
    # HWIO; a transposed layer's kernel is stored as [h, w, out, in]: the Conv2D kernel that
    # maps its output back to its input.
    w = tf.cast(tf.random.normal(layer.kernel_shape), dtype)
    strides, padding = [1, *layer.strides, 1], layer.padding
    into, out_of = (y, x) if layer.transposed else (x, y)  # the Conv2D view: into -> out_of

    def conv2d(into, w, out_of):
        return tf.raw_ops.Conv2D(input=into, filter=w, strides=strides, padding=padding)

    def input_gradient(into, w, out_of):
        return tf.raw_ops.Conv2DBackpropInput(input_sizes=tf.shape(into), filter=w,
                                              out_backprop=out_of, strides=strides,
                                              padding=padding)

    def filter_gradient(into, w, out_of):
        return tf.raw_ops.Conv2DBackpropFilter(input=into, filter_sizes=tf.shape(w),
                                               out_backprop=out_of, strides=strides,
                                               padding=padding)

    functions = {"Conv2D": conv2d, "Conv2DBackpropInput": input_gradient,
                 "Conv2DBackpropFilter": filter_gradient}
    return {name: (op, _repeated(functions[op], into, w, out_of))
            for name, op in kernel_ops(layer).items()}


def kernel_ops(layer: ConvLayer) -> dict[str, str]:
    """{kernel: the TensorFlow op that computes it for `layer`}."""
    if layer.transposed:
        return {"forward": "Conv2DBackpropInput", "backward-input": "Conv2D",
                "backward-filter": "Conv2DBackpropFilter"}
    return {"forward": "Conv2D", "backward-input": "Conv2DBackpropInput",
            "backward-filter": "Conv2DBackpropFilter"}


def _repeated(fn, *tensors):
    """``run(count)``: `fn(*tensors)` `count` times in a compiled loop that runs one iteration at
    a time (each result feeds a scalar the next iteration waits for, so no two overlap and
    none is pruned); the tensors enter as arguments, not constants Grappler could fold."""
    @tf.function
    def loop(count, *tensors):
        def body(index, total):
            result = fn(*tensors)
            return index + 1, total + tf.cast(tf.reshape(result, [-1])[0], tf.float32)

        return tf.while_loop(lambda index, total: index < count, body,
                             (tf.constant(0), tf.constant(0.0)), parallel_iterations=1)[1]

    return lambda count: loop(tf.constant(count), *tensors)


def time_call(run, count: int) -> float:
    """Seconds per repetition of `run(count)` (after one warm-up call)."""
    run(1).numpy()
    start = time.perf_counter()
    run(count).numpy()
    return (time.perf_counter() - start) / count


def measure(layers: list[ConvLayer], batch: int, repeats: int, count: int) -> dict:
    """{(layer name, kernel, dtype name): median ms per kernel call}, less the loop's own cost
    per iteration (an iteration that runs no kernel)."""
    built = {(layer.name, kernel, name): run for layer in layers
             for name, dtype in DTYPES.items()
             for kernel, (_, run) in kernels(layer, batch, dtype).items()}
    empty = _repeated(lambda: tf.constant(0.0))
    samples = {key: [] for key in built}
    overhead = []
    for _ in range(repeats):  # interleaved: load from other processes changes all alike
        overhead.append(time_call(empty, count))
        for key, run in built.items():
            samples[key].append(time_call(run, count))
    base = statistics.median(overhead)
    return {key: max(statistics.median(values) - base, 0.0) * 1e3 for key, values in samples.items()}


def report(layers: list[ConvLayer], batch: int, times: dict, conv_share: float) -> list[str]:
    lines = [f"Batch {batch}: ms per kernel call (medians), per-cycle counts, float32 / bfloat16",
             "", "| layer | kernel (op) | shapes in -> out | calls per cycle | float32 ms | "
             "bfloat16 ms | float32 / bfloat16 |", "| --- | --- | --- | ---: | ---: | ---: | ---: |"]
    totals = {"float32": 0.0, "bfloat16": 0.0}
    by_kernel: dict[str, dict[str, float]] = {}
    first_conv = next(layer.name for layer in layers if not layer.transposed)
    for layer in layers:
        counts = layer.counts(first=layer.name == first_conv)
        for kernel, op in kernel_ops(layer).items():
            f32, bf16 = (times[(layer.name, kernel, name)] for name in DTYPES)
            count = counts[kernel]
            if not count:
                continue
            totals["float32"] += count * f32
            totals["bfloat16"] += count * bf16
            group = by_kernel.setdefault(f"{'transposed ' if layer.transposed else ''}{kernel}",
                                         {"float32": 0.0, "bfloat16": 0.0})
            group["float32"] += count * f32
            group["bfloat16"] += count * bf16
            ratio = f"{f32 / bf16:.2f}x" if bf16 else "n/a"
            lines.append(f"| {layer.model}/{layer.name} | {kernel} ({op}) | "
                         f"{'x'.join(map(str, layer.input_shape))} -> "
                         f"{'x'.join(map(str, layer.output_shape))} | {count} | {f32:.3f} | "
                         f"{bf16:.3f} | {ratio} |")
    lines += ["", "| per cycle | float32 ms | bfloat16 ms | float32 / bfloat16 |",
              "| --- | ---: | ---: | ---: |"]
    for name, group in by_kernel.items():
        lines.append(f"| {name} | {group['float32']:.2f} | {group['bfloat16']:.2f} | "
                     f"{group['float32'] / group['bfloat16']:.2f}x |")
    ratio = totals["float32"] / totals["bfloat16"]
    ceiling = 1 / ((1 - conv_share) + conv_share / ratio)
    lines += [f"| **all convolutions** | **{totals['float32']:.2f}** | "
              f"**{totals['bfloat16']:.2f}** | **{ratio:.2f}x** |", "",
              f"Ceiling of the whole cycle's bfloat16 / float32 speed at a convolution share of "
              f"{conv_share:.1%}: 1 / ((1 - {conv_share:.3f}) + {conv_share:.3f} / {ratio:.2f}) "
              f"= **{ceiling:.2f}x**; with every convolution at 2x it would be "
              f"{1 / ((1 - conv_share) + conv_share / 2):.2f}x.", ""]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", default="32,64")
    parser.add_argument("--repeats", type=int, default=7, help="interleaved rounds")
    parser.add_argument("--count", type=int, default=10, help="kernel calls per round")
    parser.add_argument("--conv_share", type=float, default=0.745,
                        help="the convolutions' share of a float32 cycle (module docstring)")
    args = parser.parse_args()
    started, load_before = time.perf_counter(), load_average()
    layers = preset_convolutions()
    lines = [f"Command: `python benchmarks/bf16_ceiling.py {' '.join(sys.argv[1:])}`", f"CPU bfloat16 flags: {cpu_flags()}; {os.cpu_count()} logical CPUs; "
             f"oneDNN: TF_ENABLE_ONEDNN_OPTS={os.environ.get('TF_ENABLE_ONEDNN_OPTS', 'unset')}", ""]
    for batch in (int(b) for b in args.batches.split(",")):
        times = measure(layers, batch, args.repeats, args.count)
        lines += report(layers, batch, times, args.conv_share)
    lines.append(f"Load average (1, 5, 15 min) before {load_before}, after {load_average()}; "
                 f"{time.perf_counter() - started:.0f} s.")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
