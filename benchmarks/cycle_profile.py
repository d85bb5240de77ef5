"""Where a training cycle's time goes, and which thread settings suit the cores present.

Usage, from the repository root:

    python benchmarks/cycle_profile.py                  # the op-level profiles (~3 min on 2 CPU
                                                        # cores)
    python benchmarks/cycle_profile.py --parts threads  # the thread settings (~7 min: 15 runs)
    python benchmarks/cycle_profile.py --parts profile,threads --json /tmp/profile.json
    python benchmarks/cycle_profile.py --cases dcgan,dcgan_ema --cycles 200

Profile: each case is built exactly as `run.py --mode=train` builds it (`trainers.api.config`
for the preset and flags, `modes.train.resolve_precision`, `modes.train.build`: the dataset
pipeline, the setup's models, optimizers and phases, the `Trainer` and its compiled loop; the
run's periodic jobs, `modes.train.periodic_jobs`, with a summary writer; driven by the
`Controller` that `modes.train.make_controller` makes), in a fresh process. It trains one loop
(--cycles_per_loop, the preset's 50; fewer when fewer are traced) to trace and warm up, then
--cycles untraced (the wall time without the profiler), then --cycles under TensorFlow's profiler
(`tf.profiler.experimental`), and reads the trace it wrote (`benchmarks/cycle_trace.py` says
how events become time per op kind). Checkpoints, image grids and histograms (every 500, 500,
1000 cycles by default) fall outside the traced cycles; the per-loop scalar summaries and the
controller are in them. Cases (`CASES`): the dcgan preset as it trains (batch 32, top-k,
--precision=auto: bfloat16 on a CPU with avx512_bf16 or amx_bf16), the same in float32, the
ResNet networks at 32 px, and (not by default) the preset with an EMA generator, which the
dcgan preset does not keep (the EMA's ops carry no name scope, so its cost is the difference
to the dcgan case), and the preset on the ring8 points ("toy": the MLP pair at batch 64 in
float32, as `throughput.py`'s toy workload), whose cycle is mostly per-op overhead.

Threads: the dcgan preset's wall time per cycle with
`tf.config.threading.set_intra_op_parallelism_threads` / `set_inter_op_parallelism_threads`
at each --threads pair (0 = TensorFlow's default), each in a fresh process (they must be set
before TensorFlow runs an op), the pairs interleaved over --rounds rounds (other processes
share the CPU): medians, and their ratio to the default's median.

The report prints the CPU's bfloat16 flags and the load average before and after.
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Callable

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)


@dataclasses.dataclass(frozen=True)
class ProfileCase:
    """A run to profile: what it is, its flags on top of --setup=dcgan, and how many cycles
    to trace (and time; the warm-up is one loop, at most that many cycles) unless --cycles."""

    title: str
    flags: dict
    cycles: int = 100


CASES = {
    "dcgan": ProfileCase("dcgan preset as it trains (--precision=auto)", {}),
    "dcgan_float32": ProfileCase("dcgan preset, --precision=float32", {"precision": "float32"}),
    "resnet32": ProfileCase("dcgan preset, --arch=resnet --resolution=32 (--precision=auto)",
                            {"arch": "resnet", "resolution": 32}, cycles=20),
    "dcgan_ema": ProfileCase("dcgan preset + --ema_halflife_kimg=10 (--precision=auto)",
                             {"ema_halflife_kimg": 10.0}),
    "toy": ProfileCase("dcgan preset on the ring8 points (the MLP pair), batch 64, float32, as "
                       "throughput.py's toy", {"dataset": "ring8", "batch_size": 64,
                                               "precision": "float32"}, cycles=1000),
}
DEFAULT_CASES = ("dcgan", "dcgan_float32", "resnet32")
DEFAULT_THREADS = ((0, 0), (2, 1), (2, 2), (1, 2), (1, 1))
FUSED_CONVOLUTION = r"^_FusedConv2D$"
LOOP_FUNCTION = "__inference__loop_fn"


def cpu_flags() -> str:
    """The CPU's bfloat16 flags (`grep -o 'avx512_bf16\\|amx_bf16' /proc/cpuinfo | sort -u`)."""
    try:
        with open("/proc/cpuinfo") as file:
            text = file.read()
    except OSError:
        return "unknown (no /proc/cpuinfo)"
    found = sorted({flag for flag in ("avx512_bf16", "amx_bf16") if f" {flag}" in text})
    return ", ".join(found) or "none"


def load_average() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


# ---------------------------------------------------------------- child: one run in this process

def build_training(flags: dict, logdir: str):
    """(config, run, jobs) as `modes.train.train` builds them, with nothing locked or written
    but the summaries; `flags` may name the --setup (default dcgan). The run keeps the preset's --train_cycles, which the input pipeline
    reads: a run that reads less than the whole dataset caches it while training instead of
    holding it in memory first (`datasets.pipeline`)."""
    from trainers import api
    config = api.config(**{"setup": "dcgan", **flags}, logdir=logdir)
    api.prepare_runtime(config)
    from trainers.modes import train
    config = train.resolve_precision(config)
    run = train.build(config, hold=None)
    jobs = train.periodic_jobs(config, run, None, io.StringIO())
    return config, run, jobs


def train_to(config, run, jobs, stop: int) -> float:
    """Trains to cycle `stop` under the run's controller; its wall seconds. Checkpoints are
    left out: they are written every --checkpoint_every cycles, not in a cycle."""
    from trainers.modes import train
    controller = train.make_controller(dataclasses.replace(config, train_cycles=stop), run, jobs,
                                       None)
    controller.checkpoint_manager = None
    started = time.perf_counter()
    try:
        controller.run()
    finally:
        controller.preemption.close()
    return time.perf_counter() - started


def child_profile(case: str, cycles: int, out: str) -> None:
    """Warms `case` up, times `cycles` cycles, traces `cycles` more; writes the record to `out`."""
    import tensorflow as tf
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    from benchmarks import cycle_trace
    space = xplane_pb2.XSpace()
    with tempfile.TemporaryDirectory(prefix="cycle_profile_", ignore_cleanup_errors=True) as logdir:
        config, run, jobs = build_training(CASES[case].flags, logdir)
        warmup = min(config.cycles_per_loop, cycles)
        trace_dir = os.path.join(logdir, "profile")
        with tf.summary.create_file_writer(logdir).as_default():
            train_to(config, run, jobs, warmup)
            plain = train_to(config, run, jobs, warmup + cycles)
            tf.profiler.experimental.start(trace_dir)
            try:
                profiled = train_to(config, run, jobs, warmup + 2 * cycles)
            finally:
                tf.profiler.experimental.stop()
        with open(cycle_trace.xplane_files(trace_dir)[-1], "rb") as file:
            space.ParseFromString(file.read())
    events = cycle_trace.read_events(space)
    result = cycle_trace.breakdown(cycle_trace.charged_self_times(events), cycles)
    _write(out, {
        "case": case, "title": CASES[case].title, "flags": CASES[case].flags,
        "precision": config.precision, "batch_size": config.batch_size, "cycles": cycles,
        "cycles_per_loop": config.cycles_per_loop,
        "wall_ms_per_cycle": 1e3 * plain / cycles,
        "profiled_wall_ms_per_cycle": 1e3 * profiled / cycles,
        "loop_call_ms_per_cycle": cycle_trace.function_call_ps(events, LOOP_FUNCTION) / 1e9 / cycles,
        "fused_convolutions_per_cycle": cycle_trace.count_ops(events, FUSED_CONVOLUTION) / cycles,
        "convolutions_per_cycle": cycle_trace.count_ops(events, cycle_trace.CONVOLUTION.pattern)
        / cycles,
        "categories": result.categories, "total_ms": result.total_ms,
        "op_types": [[name, category, ms] for (name, category), ms in result.op_types.items()],
    })


def child_time(case: str, cycles: int, intra: int, inter: int, out: str) -> None:
    """Sets the thread pools before TensorFlow runs an op, warms `case` up with one loop and
    times `cycles` cycles; writes the record to `out`."""
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(intra)
    tf.config.threading.set_inter_op_parallelism_threads(inter)
    with tempfile.TemporaryDirectory(prefix="cycle_threads_", ignore_cleanup_errors=True) as logdir:
        config, run, jobs = build_training(CASES[case].flags, logdir)
        with tf.summary.create_file_writer(logdir).as_default():
            train_to(config, run, jobs, config.cycles_per_loop)
            seconds = train_to(config, run, jobs, config.cycles_per_loop + cycles)
    _write(out, {"case": case, "intra": intra, "inter": inter, "precision": config.precision,
                 "ms_per_cycle": 1e3 * seconds / cycles,
                 "threads_seen": [tf.config.threading.get_intra_op_parallelism_threads(),
                                  tf.config.threading.get_inter_op_parallelism_threads()]})


def _write(path: str, record: dict) -> None:
    with open(path, "w") as file:
        json.dump(record, file)


# ------------------------------------------------------------------ parent: runs the children

def run_child(arguments: list[str], timeout: float) -> dict:
    """This script as a child process with `arguments`; the JSON record it wrote."""
    with tempfile.TemporaryDirectory() as directory:
        out = os.path.join(directory, "record.json")
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
        env.setdefault("GANTRY_OFFLINE", "1")
        result = subprocess.run([sys.executable, os.path.abspath(__file__), *arguments,
                                 f"--child_out={out}"], cwd=REPO_ROOT, env=env,
                                capture_output=True, text=True, timeout=timeout)
        if result.returncode != 0 or not os.path.exists(out):
            raise RuntimeError(f"child {' '.join(arguments)} failed ({result.returncode}):\n"
                               f"{result.stderr[-3000:]}")
        with open(out) as file:
            return json.load(file)


def measure_threads(args: argparse.Namespace) -> list[dict]:
    """Every --threads pair once per round, in an order rotated by one each round."""
    records = []
    pairs = list(args.threads)
    for round_index in range(args.rounds):
        order = pairs[round_index % len(pairs):] + pairs[:round_index % len(pairs)]
        for intra, inter in order:
            print(f"threads round {round_index + 1}/{args.rounds}: intra {intra}, inter {inter}",
                  flush=True)
            record = run_child(["--child=time", f"--case={args.threads_case}",
                                f"--cycles={args.cycles or CASES[args.threads_case].cycles}", f"--intra={intra}", f"--inter={inter}"],
                               timeout=args.timeout)
            records.append({**record, "round": round_index})
    return records


def thread_table(records: list[dict]) -> list[str]:
    """Median wall ms per cycle per (intra, inter) pair, each round's, and the ratio of the
    default's (0, 0) median to it (above 1: faster than the default)."""
    pairs = list(dict.fromkeys((r["intra"], r["inter"]) for r in records))
    times = {pair: [r["ms_per_cycle"] for r in records if (r["intra"], r["inter"]) == pair]
             for pair in pairs}
    default = statistics.median(times[(0, 0)]) if (0, 0) in times else None
    lines = ["| intra-op / inter-op threads | median ms per cycle | rounds (ms per cycle) | "
             "speed vs default (0/0) |", "| --- | ---: | --- | ---: |"]
    for (intra, inter), values in times.items():
        median = statistics.median(values)
        ratio = "n/a" if default is None else f"{default / median:.2f}x"
        label = "0 / 0 (default)" if (intra, inter) == (0, 0) else f"{intra} / {inter}"
        lines.append(f"| {label} | {median:.1f} | {', '.join(f'{v:.1f}' for v in values)} | "
                     f"{ratio} |")
    return lines


def profile_report(records: list[dict], top: int) -> list[str]:
    """The cases side by side by category, then each case's wall times and top op types."""
    from benchmarks import cycle_trace
    lines = ["| category | " + " | ".join(r["case"] for r in records) + " |",
             "| --- |" + " ---: |" * len(records)]
    for name in cycle_trace.CATEGORIES:
        if any(name in r["categories"] for r in records):
            cells = [_cell(r["categories"].get(name), r["total_ms"]) for r in records]
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines.append("| **op time, all threads** | " + " | ".join(
        f"**{r['total_ms']:.2f} ms**" for r in records) + " |")
    lines.append("| wall per cycle, no profiler | " + " | ".join(
        f"{r['wall_ms_per_cycle']:.2f} ms" for r in records) + " |")
    lines.append("| wall per cycle, profiled | " + " | ".join(
        f"{r['profiled_wall_ms_per_cycle']:.2f} ms" for r in records) + " |")
    lines.append("| of it between the loop's calls (Python, summaries, controller) | " + " | ".join(
        f"{r['profiled_wall_ms_per_cycle'] - r['loop_call_ms_per_cycle']:.2f} ms"
        for r in records) + " |")
    lines.append("| _FusedConv2D / all convolution ops per cycle | " + " | ".join(
        f"{r['fused_convolutions_per_cycle']:g} / {r['convolutions_per_cycle']:g}"
        for r in records) + " |")
    for record in records:
        breakdown = cycle_trace.Breakdown(
            record["categories"], {(n, c): ms for n, c, ms in record["op_types"]},
            record["total_ms"])
        lines += ["", f"{record['case']}: {record['title']}, trained in {record['precision']}, "
                      f"batch {record['batch_size']}, {record['cycles']} cycles traced; top "
                      f"{top} op types:", "",
                  *cycle_trace.markdown_top_types(breakdown, top)]
    return lines


def _cell(ms: float | None, total_ms: float) -> str:
    return "-" if not ms else f"{ms:.2f} ms ({ms / total_ms:.1%})"


def command_line() -> str:
    return " ".join(["python", "benchmarks/cycle_profile.py", *sys.argv[1:]])


def parse_pairs(text: str) -> list[tuple[int, int]]:
    try:
        pairs = [tuple(int(n) for n in item.split("/")) for item in text.split(",") if item]
    except ValueError:
        pairs = []
    if not pairs or any(len(p) != 2 or min(p) < 0 for p in pairs):
        raise argparse.ArgumentTypeError(f"{text!r}: use INTRA/INTER pairs of counts >= 0, e.g. "
                                         "0/0,2/1,1/1 (0 = TensorFlow's default).")
    return list(dict.fromkeys(pairs))


def parse_names(choices) -> Callable[[str], list[str]]:
    def parse(text: str) -> list[str]:
        names = list(dict.fromkeys(n for n in text.split(",") if n))
        if not names or any(n not in choices for n in names):
            raise argparse.ArgumentTypeError(f"{text!r}: use a comma-separated list of "
                                             f"{', '.join(choices)}.")
        return names
    return parse


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", default=["profile"],
                        type=parse_names(("profile", "threads")),
                        help="profile: the op-level profiles of --cases; threads: the thread "
                             "settings' wall times")
    parser.add_argument("--cases", type=parse_names(tuple(CASES)), default=list(DEFAULT_CASES),
                        help=f"profiled cases: {', '.join(CASES)} (default "
                             f"{','.join(DEFAULT_CASES)})")
    parser.add_argument("--cycles", type=int, default=None,
                        help="cycles traced, and timed untraced, per case after one warm-up "
                             "loop (default: the case's own, 100; resnet32 20); cycles timed "
                             "per thread setting (default 100)")
    parser.add_argument("--top", type=int, default=15, help="op types listed per case")
    parser.add_argument("--threads", type=parse_pairs, default=list(DEFAULT_THREADS),
                        help="INTRA/INTER pairs to time (default "
                             f"{','.join(f'{a}/{b}' for a, b in DEFAULT_THREADS)})")
    parser.add_argument("--threads_case", choices=tuple(CASES), default="dcgan")
    parser.add_argument("--rounds", type=int, default=3, help="rounds over the thread pairs")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per child process")
    parser.add_argument("--json", default="", metavar="PATH", help="also write the records here")
    parser.add_argument("--child", choices=("profile", "time"), help=argparse.SUPPRESS)
    parser.add_argument("--case", choices=tuple(CASES), help=argparse.SUPPRESS)
    parser.add_argument("--intra", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--inter", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--child_out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    for flag in ("cycles", "rounds", "top"):
        if getattr(args, flag) is not None and getattr(args, flag) < 1:
            parser.error(f"--{flag}={getattr(args, flag)!r} is invalid: use 1 or more.")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.child == "profile":
        return child_profile(args.case, args.cycles, args.child_out)
    if args.child == "time":
        return child_time(args.case, args.cycles, args.intra, args.inter, args.child_out)
    started, load_before = time.perf_counter(), load_average()
    profiles, threads = [], []
    if "profile" in args.parts:
        for case in args.cases:
            print(f"profiling {case}: {CASES[case].title}", flush=True)
            cycles = args.cycles or CASES[case].cycles
            profiles.append(run_child(["--child=profile", f"--case={case}", f"--cycles={cycles}"],
                                      timeout=args.timeout))
    if "threads" in args.parts:
        threads = measure_threads(args)
    lines = ["", f"Command: `{command_line()}`",
             f"CPU bfloat16 flags: {cpu_flags()}; {os.cpu_count()} logical CPUs; load average "
             f"(1, 5, 15 min) before {load_before}, after {load_average()}; "
             f"{time.perf_counter() - started:.0f} s.", ""]
    if profiles:
        lines += ["Time per cycle by category (self time of the ops, summed over threads; "
                  "share of that sum):", "", *profile_report(profiles, args.top), ""]
    if threads:
        cycles = args.cycles or CASES[args.threads_case].cycles
        lines += [f"Thread settings, {CASES[args.threads_case].title}, {cycles} cycles "
                  f"timed per process after one warm-up loop, {args.rounds} interleaved rounds "
                  f"(trained in {threads[0]['precision']}):", "", *thread_table(threads)]
    print("\n".join(lines))
    if args.json:
        with open(args.json, "w") as file:
            json.dump({"command": command_line(), "cpu_flags": cpu_flags(),
                       "load_before": load_before, "load_after": load_average(),
                       "profiles": profiles, "threads": threads}, file, indent=2)
    return None


if __name__ == "__main__":
    main()
