"""Performance report: Gantry's trainer against the tutorial-style fused GAN loop.

Usage, from the repository root:

    python benchmarks/throughput.py                      # full report (~12 min on 2 CPU cores)
    python benchmarks/throughput.py --quick              # smoke run of every case kind (28 cases,
                                                         # several minutes on 2 CPU cores)
    python benchmarks/throughput.py --quick --models toy --loops fused,simultaneous
        --precisions float32 --xla off --replicas 1 --warmup 1 --json /tmp/t.json
                                                         # (one line) the smallest meaningful run,
                                                         # ~20-40 s: what tests/benchmarks runs
    python benchmarks/throughput.py --models toy --xla off,on --replicas 1,2 --json toy.json
    python benchmarks/throughput.py --precisions float32,mixed_float16   # on a GPU

Workloads (`--models`): "dcgan28", the `dcgan` preset on Fashion-MNIST (28x28x1; synthetic
images of that shape if the data is missing); "dcgan64", the same preset on synthetic 64x64x3
images; "toy", the MLP pair on ring8 points. Every case reads its data through Gantry's own
input pipeline (`datasets.pipeline.training_input_fn`: cache, seeded shuffle, repeat, batch,
prefetch), so input cost is part of what is measured.

Cases of each workload, at the reference settings (the first value of --precisions, --xla
and --replicas): the tutorial's fused step called from a Python loop; the fused step in a
`tf.range` loop of many cycles per call; the trainer's arithmetic written plainly
(alternating D then G updates, each with its own generator forward pass: the fused step vs it
is the price of alternating, it vs the trainer the price of the trainer's machinery); Gantry's
trainer with 1 and with many cycles per call; the trainer again on data pre-materialised in
memory (`take(1).cache().repeat()` of the same pipeline); the trainer with
`--update_order=simultaneous` (the fused step's arithmetic, with the trainer's machinery). Then a fused and a trainer case for
every other value of --precisions, --xla and --replicas, one axis at a time (all combinations
with --combine). mixed_float16 needs a GPU; XLA with 2 replicas cannot compile the DCGAN
updates (synchronized batch norm, see `trainers.engine.steps.make_replica_update`); such cases are
skipped with a note. `--replicas 2` on a CPU mirrors over two logical CPU devices (both split
from the same cores: it measures the cost of replication, not a speed-up).

Measurement: every case is built and warmed up (traced, compiled, pipeline buffers filled),
then runs one more untimed cycle once all are built (building re-seeds, which clears
TensorFlow's function caches); the timed repeats then go round-robin over the cases, so load
from other processes spreads over all of them, and medians are reported. "CPU ms/image" is the
process's CPU time (all its threads, input pipeline included) per image: the work a case
costs, which other processes' load hardly changes, unlike images/s; on a shared machine read
the targets' CPU-time figures. Images are the real
images consumed. Columns: GFLOP/cycle is counted from the traced graph (`benchmarks/flops.py`
says how; a self-check compares it with a hand count at start-up); achieved FLOP/s =
GFLOP/cycle x cycles/s, also as a fraction of this machine's matmul peak, measured before
every round under the same load (the highest round counts; float32 peak for float32 cases,
bfloat16/float16 for mixed ones); "vs fused" compares images/s and FLOP/s with the fused
`tf.range` case of equal settings. Targets use paired ratios (the median over rounds of the
two cases' ratio within a round). Input wait = 1 - (images/s on the real pipeline) /
(images/s on pre-materialised data), for the trainer; Fashion-MNIST is decoded into memory
when the pipeline is built (`pipeline.hold_in_memory`), so no epoch decodes while steps wait.

Memory (`MemoryProbe`): "held" is what building and warming up a case added and kept
(variables, optimizer slots, data caches), "step peak" the most its timed calls added on top of
what was live just before them (activations, gradients, temporaries). Both come from the
device allocator's statistics where it keeps them (a GPU; a CPU with
TF_CPU_ALLOCATOR_USE_BFC=true, or with oneDNN's optimizations on, TensorFlow's default on CPUs
with AVX-512), else from the process's resident set size (RSS), so the report
runs under TensorFlow's default CPU allocator too. The measure used is printed at start,
explained under Notes and recorded in the JSON (settings.memory_measure, and the column headers
as settings.memory_columns). The process's peak RSS (ru_maxrss) is reported once for the run.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import time
from typing import Callable

try:
    import resource
except ImportError:  # not on Windows: MemoryProbe then reports n/a
    resource = None

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import trainers.api  # noqa: E402,F401  declares every flag, in order, before a module reads one
from trainers.engine.distribution import configure_cpu_replicas  # noqa: E402

configure_cpu_replicas(2)  # before any other TF op: 1- and 2-replica cases in one process

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

tf.get_logger().setLevel("ERROR")  # every case is its own tf.function: retracing warnings

from benchmarks import flops, throughput_report  # noqa: E402
from benchmarks.throughput_cases import (LOOPS, TRAINER_ORDERS, Built, Case,  # noqa: E402
                                         Workload, build_case, cases, examples_fn, workloads)
from trainers.config.flags import Config  # noqa: E402
from trainers.engine.flags import DTYPE_POLICIES  # noqa: E402
from trainers.setups import building, registry  # noqa: E402

PEAK_DTYPES = {"float32": tf.float32, "mixed_bfloat16": tf.bfloat16, "mixed_float16": tf.float16}


PROC_STATUS = "/proc/self/status"
PROC_CLEAR_REFS = "/proc/self/clear_refs"
MEMORY_MEASURES = ("allocator", "rss", "rss_so_far", "none")
MEMORY_FIELDS = ("held_mib", "step_peak_mib")  # each result's memory figures, MiB or None


def mib(value: int | None) -> float | None:
    return None if value is None else value / 2 ** 20


def delta(after: int | None, before: int | None) -> int | None:
    return None if after is None or before is None else after - before


class MemoryProbe:
    """Measures a case's memory by the best means this process has, so the report runs under
    any allocator (by default TensorFlow's CPU allocator keeps no statistics and
    `get_memory_info` raises ValueError).

    Each measure gives "held" (`current()` after building a case minus before) and "step peak"
    (the most the calls between `start_peak` and `step_peak` added on top of what was live at
    `start_peak`), in bytes, or None where it cannot:
    1. "allocator": `tf.config.experimental.get_memory_info` of the device: exact, but on a CPU
       only with TF_CPU_ALLOCATOR_USE_BFC=true or oneDNN on, and there allocations under 256 KiB
       are not counted.
    2. "rss": VmRSS of /proc/self/status; the peak is VmHWM, reset to the current RSS by writing
       "5" to /proc/self/clear_refs (Linux >= 4.0). Memory the calls reuse from what is already
       resident does not show.
    3. "rss_so_far": where VmHWM cannot be reset, the step peak is the process's peak since it
       started (ru_maxrss): not per case, and monotone over the rows.
    4. "none": every figure is None.
    """

    LABELS = {  # the table's memory column headers (settings.memory_columns), per measure
        "allocator": ("held MiB (allocator)", "step peak MiB (allocator)"),
        "rss": ("held RSS MiB", "step peak RSS MiB"),
        "rss_so_far": ("held RSS MiB", "process peak RSS MiB so far"),
        "none": ("held MiB", "step peak MiB"),
    }
    LEGENDS = {
        "allocator": "Memory: TensorFlow allocator statistics of {device} (on a CPU allocations "
                     "under 256 KiB are not counted): held = what building and warming up the "
                     "case added and kept, step peak = the most its timed calls allocated on "
                     "top of what was live just before them.",
        "rss": "Memory: {device}'s allocator keeps no statistics (a CPU needs "
               "TF_CPU_ALLOCATOR_USE_BFC=true), so the process's resident set size is used: "
               "held RSS = the RSS building and warming up the case added, step peak RSS = the "
               "RSS high-water mark of its timed calls above the RSS just before them (memory "
               "they reuse from what is already resident does not show).",
        "rss_so_far": "Memory: {device}'s allocator keeps no statistics and the RSS high-water "
                      "mark cannot be reset here, so the peak column is the process's peak RSS "
                      "so far (ru_maxrss; each row includes every earlier case); held RSS = the "
                      "RSS building the case added (n/a without /proc/self/status).",
        "none": "Memory: not measured (no allocator statistics for {device}, no "
                "/proc/self/status, no getrusage): n/a.",
    }

    def __init__(self, device: str):
        self.device = device
        self.measure = self._choose()

    def _choose(self) -> str:
        try:
            tf.config.experimental.get_memory_info(self.device)
            tf.config.experimental.reset_memory_stats(self.device)
            return "allocator"
        except (ValueError, RuntimeError, tf.errors.OpError):
            pass
        if self._proc_status("VmRSS") is not None and self._reset_rss_peak():
            if self._proc_status("VmHWM") is not None:
                return "rss"
        return "rss_so_far" if self.process_peak_rss() is not None else "none"

    @staticmethod
    def _proc_status(field: str) -> int | None:
        """A "kB" field of /proc/self/status in bytes; None where there is no such file."""
        try:
            with open(PROC_STATUS) as file:
                for line in file:
                    if line.startswith(field + ":"):
                        return int(line.split()[1]) * 1024
        except (OSError, ValueError, IndexError):
            pass
        return None

    @staticmethod
    def _reset_rss_peak() -> bool:
        """Sets VmHWM to the current RSS (Linux >= 4.0); False where that is not allowed."""
        try:
            with open(PROC_CLEAR_REFS, "w") as file:
                file.write("5")
            return True
        except OSError:
            return False

    @staticmethod
    def process_peak_rss() -> int | None:
        """The process's peak RSS since it started (ru_maxrss: KiB on Linux, bytes on macOS)."""
        if resource is None:
            return None
        try:
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        except (OSError, ValueError):
            return None
        return peak if sys.platform == "darwin" else peak * 1024

    @property
    def labels(self) -> tuple[str, str]:
        return self.LABELS[self.measure]

    @property
    def legend(self) -> str:
        return self.LEGENDS[self.measure].format(device=self.device)

    def current(self) -> int | None:
        """Bytes live now (allocator) or resident (RSS)."""
        if self.measure == "allocator":
            return tf.config.experimental.get_memory_info(self.device)["current"]
        if self.measure == "none":
            return None
        return self._proc_status("VmRSS")

    def start_peak(self) -> int | None:
        """Starts a case's peak window; returns the baseline to pass to `step_peak`."""
        if self.measure == "allocator":
            tf.config.experimental.reset_memory_stats(self.device)
        elif self.measure == "rss":
            self._reset_rss_peak()
        return self.current()

    def step_peak(self, baseline: int | None) -> int | None:
        """The peak since `start_peak` above `baseline` (the process's peak so far for
        "rss_so_far")."""
        if self.measure == "allocator":
            return tf.config.experimental.get_memory_info(self.device)["peak"] - baseline
        if self.measure == "rss":
            return delta(self._proc_status("VmHWM"), baseline)
        if self.measure == "rss_so_far":
            return self.process_peak_rss()
        return None


def measure(case_list: list[Case], specs: dict[str, Workload], args: argparse.Namespace, *,
            notes: list[str], memory: MemoryProbe,
            before_round: Callable[[], None]) -> tuple[list[dict], list[Built | None]]:
    """Builds and warms up every case, then times `repeats` round-robin rounds of each,
    calling `before_round()` first in every round (to measure the peak under the same load).
    `memory` measures what each case holds and its peak (None where it cannot).

    Returns the results and the built cases (which `main` keeps alive until it exits).
    """
    data = {model: examples_fn(model, args, notes) for model in dict.fromkeys(c.model for c in case_list)}
    built: list[Built | None] = []
    results = []
    for case in case_list:
        spec = specs[case.model]
        result = {**dataclasses.asdict(case), "data": data[case.model][1],
                  "batch_size": spec.batch_size, "error": None}
        print(f"Building and warming up: {throughput_report.describe(result)}", end="", flush=True)
        before, start = memory.current(), time.perf_counter()
        try:
            case_built = build_case(case, spec, data[case.model][0], args)
            case_built.run(args.warmup)
            result["flops_per_cycle"] = flops.graph_flops(case_built.graph())
            result["images_per_cycle"] = case_built.images_per_cycle
        except Exception as error:  # noqa: BLE001 -- reported in the table, the run goes on
            print(f"  FAILED: {type(error).__name__}: {error}", flush=True)
            result["error"] = f"{type(error).__name__}: {str(error).splitlines()[0][:200]}"
            case_built = None
        result["held_mib"] = mib(delta(memory.current(), before))
        print(f" ({time.perf_counter() - start:.1f} s)", flush=True)
        built.append(case_built)
        results.append(result)
    # keras.utils.set_random_seed (in every build) clears TensorFlow's kernel and function
    # caches, so each case re-instantiates its functions on its next call (0.2 s and more):
    # one untimed cycle per case pays that before any timing.
    for case_built in built:
        if case_built is not None:
            case_built.run(1)
    timings: list[list[tuple[int, float, int | None, float]]] = [[] for _ in case_list]
    for repeat in range(args.repeats):
        print(f"Timing round {repeat + 1}/{args.repeats}", flush=True)
        before_round()
        for case, case_built, record in zip(case_list, built, timings):
            if case_built is None:
                continue
            baseline = memory.start_peak()
            start, cpu_start = time.perf_counter(), time.process_time()
            images = case_built.run(specs[case.model].cycles)
            seconds = time.perf_counter() - start
            record.append((images, seconds, memory.step_peak(baseline),
                           time.process_time() - cpu_start))
    for result, record in zip(results, timings):
        if record:
            rates = [images / seconds for images, seconds, _, _ in record]
            peaks = [peak for _, _, peak, _ in record if peak is not None]
            result.update(images_per_second=statistics.median(rates),
                          repeat_images_per_second=rates,
                          repeat_seconds=[seconds for _, seconds, _, _ in record],
                          repeat_cpu_ms_per_image=[1e3 * cpu / images
                                                   for images, _, _, cpu in record],
                          images_per_repeat=record[0][0],
                          step_peak_mib=mib(max(peaks)) if peaks else None)
    return results, built


def flop_self_check(args: argparse.Namespace) -> dict:
    """Counts the FLOPs of the traced toy steps (fused, alternating, trainer) at batch 16 and
    compares them with `flops.mlp_pair_hand_counts`."""
    spec = Workload("self-check", workloads(False)["toy"].info, 16, None, 1, 1)
    examples = examples_fn("toy", args, [])[0]
    counted = {}
    for loop in ("fused", "alternating", "trainer", "simultaneous"):
        built = build_case(Case("toy", loop, 1), spec, examples, args)
        if loop in TRAINER_ORDERS:
            built.run(1)  # creates the trainer's iterator, which its graph is traced with
        counted[loop] = flops.graph_flops(built.graph())
    keras.utils.set_random_seed(args.seed)
    config = registry.resolve(Config(latent_dim=args.latent_dim))
    setup = building.build_run(registry.get(config.setup), config, spec.info,
                               tf.distribute.get_strategy())
    widths = {}
    for name in ("generator", "discriminator"):
        kernels = [layer.kernel for layer in setup.models[name].layers
                   if isinstance(layer, keras.layers.Dense)]
        widths[name] = [kernels[0].shape[0]] + [kernel.shape[1] for kernel in kernels]
    hand = flops.mlp_pair_hand_counts(batch=spec.batch_size, generator=widths["generator"],
                                      discriminator=widths["discriminator"])
    expected = {"fused": hand["fused"], "alternating": hand["alternating"],
                "trainer": hand["alternating"], "simultaneous": hand["fused"]}
    return {"batch_size": spec.batch_size, "widths": widths, "counted": counted,
            "hand": expected, "ok": counted == expected}


def parse_list(choices, convert=str):
    def parse(text: str) -> list:
        values = [convert(item) for item in text.split(",") if item]
        unknown = [value for value in values if value not in choices]
        if not values or unknown:
            raise argparse.ArgumentTypeError(
                f"{text!r}: use a comma-separated list of {', '.join(map(str, choices))}.")
        return list(dict.fromkeys(values))
    return parse


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: narrow models, small batches, 3 cycles, 1 repeat (with "
                             "--models toy --loops fused,simultaneous --precisions float32 "
                             "--xla off --replicas 1 --warmup 1: the smallest meaningful run, "
                             "well under a minute)")
    parser.add_argument("--models", type=parse_list(("dcgan28", "dcgan64", "toy")), default=None,
                        help="default dcgan28,dcgan64,toy (quick: dcgan28,toy; dcgan64 runs "
                             "the same code on bigger tensors)")
    parser.add_argument("--loops", type=parse_list((*LOOPS, "input")), default=[*LOOPS, "input"],
                        help="case kinds; 'input' adds the trainer on pre-materialised data")
    parser.add_argument("--precisions", type=parse_list(DTYPE_POLICIES), default=None,
                        help="the first is the reference (default: all; mixed_float16 is "
                             "skipped with a note when there is no GPU)")
    parser.add_argument("--xla", type=parse_list(("off", "on")), default=["off", "on"])
    parser.add_argument("--replicas", type=parse_list((1, 2), int), default=[1, 2])
    parser.add_argument("--combine", action="store_true",
                        help="all combinations of --precisions, --xla, --replicas, not one "
                             "axis at a time")
    parser.add_argument("--data", choices=("fashion_mnist", "synthetic"), default="fashion_mnist",
                        help="dcgan28's data")
    parser.add_argument("--cycles", type=int, default=None,
                        help="timed cycles per repeat for every model (default: per model)")
    parser.add_argument("--repeats", type=int, default=None, help="default 5 (quick: 1)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed cycles per case first")
    parser.add_argument("--latent_dim", type=int, default=100)
    parser.add_argument("--shuffle_buffer", type=int, default=None,
                        help=f"examples (default {Config.shuffle_buffer} as in run.py, quick 512)")
    parser.add_argument("--matmul_size", type=int, default=None,
                        help="side of the peak-FLOP/s matmul (default 2048, quick 512)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default="throughput.json", metavar="PATH",
                        help="where to write the results ('' for nowhere; settings."
                             "memory_measure says what the memory figures are)")
    args = parser.parse_args(argv)
    args.xla = [value == "on" for value in args.xla]
    args.models = args.models or (["dcgan28", "toy"] if args.quick else
                                  ["dcgan28", "dcgan64", "toy"])
    args.repeats = args.repeats or (1 if args.quick else 5)
    args.matmul_size = args.matmul_size or (512 if args.quick else 2048)
    args.shuffle_buffer = args.shuffle_buffer or (512 if args.quick else Config.shuffle_buffer)
    for flag in ("repeats", "warmup", "latent_dim", "matmul_size", "cycles", "shuffle_buffer"):
        value = getattr(args, flag)
        if value is not None and value < 1:
            parser.error(f"--{flag}={value!r} is invalid: use 1 or more.")
    if args.json and not os.path.isdir(os.path.dirname(os.path.abspath(args.json))):
        parser.error(f"--json={args.json!r}: its directory does not exist; create it first.")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    gpus = tf.config.list_logical_devices("GPU")
    notes = []
    args.precisions = args.precisions or list(DTYPE_POLICIES)
    if "mixed_float16" in args.precisions and not gpus:
        args.precisions.remove("mixed_float16")
        notes.append("mixed_float16 skipped: it needs a GPU (float16 on a CPU is emulated).")
    if not args.precisions:
        raise SystemExit("error: --precisions=mixed_float16 needs a GPU; add float32 or "
                         "mixed_bfloat16.")
    if gpus and 2 in args.replicas and len(gpus) < 2:
        args.replicas.remove(2)
        notes.append("2 replicas skipped: one GPU (logical CPU replicas are for CPU-only machines).")
    specs = workloads(args.quick)
    if args.cycles:
        specs = {name: dataclasses.replace(spec, cycles=args.cycles) for name, spec in specs.items()}
    memory = MemoryProbe("GPU:0" if gpus else "CPU:0")
    print(f"Memory measure: {memory.measure} ({', '.join(memory.labels)})", flush=True)
    started = time.perf_counter()
    print("FLOP-count self-check ...", flush=True)
    self_check = flop_self_check(args)
    peaks = dict.fromkeys(args.precisions, 0.0)

    def measure_peaks() -> None:
        for precision in peaks:
            peak = flops.matmul_peak(PEAK_DTYPES[precision], size=args.matmul_size)
            peaks[precision] = max(peaks[precision], peak)

    case_list, skipped = cases(args, specs)
    results, built = measure(case_list, specs, args, notes=notes, memory=memory,
                             before_round=measure_peaks)
    notes += [*skipped, memory.legend]
    throughput_report.add_derived(results, peaks)
    targets = throughput_report.targets(results, specs)
    settings = {
        **{k: v for k, v in vars(args).items() if k != "json"},
        "workloads": {name: {**dataclasses.asdict(spec), "info": {"kind": spec.info.kind,
                                                                 "shape": list(spec.info.shape)}}
                      for name, spec in specs.items() if name in args.models},
        "tensorflow": tf.__version__, "keras": keras.__version__, "cpu_count": os.cpu_count(),
        "devices": [d.name for d in tf.config.list_logical_devices()],
        "process_peak_rss_mib": mib(MemoryProbe.process_peak_rss()),
        "memory_measure": memory.measure,
        "memory_columns": dict(zip(MEMORY_FIELDS, memory.labels)),
        "seconds": time.perf_counter() - started}
    print()
    print(throughput_report.markdown(results=results, targets=targets, notes=notes, peaks=peaks,
                                     self_check=self_check, settings=settings, specs=specs))
    if args.json:
        with open(args.json, "w") as file:
            json.dump({"settings": settings, "matmul_peak_flops": peaks, "self_check": self_check,
                       "results": results, "targets": targets, "notes": notes}, file, indent=2)
        print(f"\nWrote {args.json}")
    failed = not self_check["ok"] or any(r["error"] for r in results)
    # Exits while `built` is still referenced: tearing down dozens of tf.data iterators (TFDS
    # readers, shuffle buffers, per-replica iterators) takes tens of seconds, and everything
    # has been printed and written by now.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(1 if failed or not built else 0)


if __name__ == "__main__":
    main()
