"""Where a traced training cycle's time goes: TensorFlow profiler events -> time per op kind.

Pure functions over `Event`s (`read_events` reads them from the XSpace protobuf that
`tf.profiler.experimental` writes, LOGDIR/plugins/profile/*/HOST.xplane.pb), so the
aggregation is tested on events built by hand (tests/benchmarks/test_cycle_trace.py).

What the host trace holds (TF 2.21, CPU): one line per thread. A graph op that runs is an event
"NODE_NAME:OpType" on an executor thread (tf_Compute/...), e.g.
"while/body/_1/while/discriminator_1/down1_lrelu_1/LeakyRelu:_MklNativeFusedConv2D" (oneDNN
kernels carry the _Mkl/_MklNative prefix); around the ops sit runtime events
("ExecutorState::Process": the executor's own work between kernels) and inside them helper
events ("ParallelFor": the op's sharded work, part of the op). The input pipeline runs on
tf_data_* threads. The Python thread holds eager ops ("EagerLocalExecute: WriteSummary": the
summaries between loops) and the call of the compiled loop, whose events span the whole call
while Python waits: a function call's time is spent in the ops it runs, on other threads, so
it is not counted.

Each event's own ("self") time is its duration less its direct children's on the same
thread; it is charged to the innermost op event enclosing it (itself for an op), so an op's
total is its kernel time including its helpers and excluding ops nested in it. Self time
outside any op goes to the runtime (executor threads), the input pipeline (tf_data threads)
or nowhere (the Python thread: waiting on the loop, or Python between loops, which the
caller times as wall time). Times on different threads add up: with two cores and inter-op
parallelism the op time of a cycle can exceed its wall time.
"""

from __future__ import annotations

import collections
import dataclasses
import glob
import os
import re
from typing import Iterable

# An executor op event: "node/name:OpType" (node names have no spaces or colons).
OP_EVENT = re.compile(r"^(?P<node>[^\s:]+):(?P<type>[A-Za-z_][A-Za-z0-9_]*)$")
# An eager op on the Python thread.
EAGER_EVENT = re.compile(r"^EagerLocalExecute: (?P<type>[A-Za-z_][A-Za-z0-9_]*)$")
# A function called as an op: its time is its ops' (on other threads).
FUNCTION_TYPE = re.compile(r"^(__inference|__forward|__backward|StatefulPartitionedCall$|"
                           r"PartitionedCall$|While$|StatelessWhile$|If$|StatelessIf$)")
ONEDNN_PREFIX = re.compile(r"^_Mkl(Native)?")

DATA, EAGER, RUNTIME = ("data (tf.data threads)", "eager ops between loops (summaries, controller)",
                        "runtime (executor between kernels)")
CATEGORIES = (  # table order
    "convolutions, forward", "convolutions, backward", "transposed convolutions, forward",
    "transposed convolutions, backward", "matmul (dense layers)", "normalisation (batch norm)",
    "casts", "resize and pooling", "activations, elementwise, reductions",
    "optimizer (Adam, gradient norm)", "EMA", "top-k", "random numbers", DATA, EAGER, RUNTIME,
    "other ops")

CONVOLUTION = re.compile(r"Conv[23]D|DepthwiseConv")
TRANSPOSED = re.compile(r"(^|/)[^/]*conv_transpose")  # Keras's Conv2DTranspose ops
NORMALISATION_SCOPE = re.compile(r"(^|_)bn\d*(_\d+)?$|batch_?norm|normali[sz]ation|layer_norm|"
                                 r"group_norm|instance_norm")
OPTIMIZER_SCOPE = re.compile(r"^(adam|rmsprop|sgd|optimizer|global_norm|clip_by)[a-z_]*(_\d+)?$")
EMA_SCOPE = re.compile(r"(^|_)ema(_|$)")
TOPK_SCOPE = re.compile(r"^(argsort|top_k|topk)(_\d+)?$")
RESIZE_POOL = re.compile(r"Resize|Pool")
ELEMENTWISE = frozenset(
    "Abs Add AddN AddV2 BiasAdd BiasAddGrad BiasAddV1 Div DivNoNan Elu Equal Exp Greater "
    "GreaterEqual L2Loss LeakyRelu Less LessEqual Log Log1p LogicalAnd LogicalNot LogicalOr Max "
    "Maximum Mean Min Minimum Mul Neg NotEqual Pow Prod RealDiv Reciprocal Relu Relu6 Rsqrt "
    "Select SelectV2 Selu Sigmoid Sign Softplus Sqrt Square SquaredDifference Sub Sum Tanh "
    "Tile".split())


@dataclasses.dataclass(frozen=True)
class Event:
    """One traced event: the thread (XLine name) it ran on, its name, start and duration in
    picoseconds, and whether it is a function call (the XStat "is_func")."""

    thread: str
    name: str
    start_ps: int
    duration_ps: int
    function: bool = False

    @property
    def end_ps(self) -> int:
        return self.start_ps + self.duration_ps


@dataclasses.dataclass(frozen=True)
class OpKind:
    """What an event's self time is charged to: a category and an op type (for an op, its type
    as TensorFlow ran it; else the runtime event's name)."""

    category: str
    op_type: str


def xplane_files(directory: str) -> list[str]:
    """The .xplane.pb files under a profiler log directory, oldest first."""
    return sorted(glob.glob(os.path.join(directory, "**", "*.xplane.pb"), recursive=True),
                  key=os.path.getmtime)


def read_events(space) -> list[Event]:
    """The events of every host plane ("/host:...") of an XSpace protobuf, as `Event`s."""
    events = []
    for plane in space.planes:
        if not plane.name.startswith("/host:"):
            continue
        is_func = {key for key, stat in plane.stat_metadata.items() if stat.name == "is_func"}
        for line in plane.lines:
            for event in line.events:
                function = any(stat.metadata_id in is_func and stat.int64_value
                               for stat in event.stats)
                events.append(Event(line.name, plane.event_metadata[event.metadata_id].name,
                                    line.timestamp_ns * 1000 + event.offset_ps,
                                    event.duration_ps, function))
    return events


def base_type(op_type: str) -> str:
    """An op type without oneDNN's kernel prefix: _MklNativeFusedConv2D -> _FusedConv2D,
    _MklMatMul -> MatMul (TensorFlow's own fused kernels keep their leading underscore)."""
    bare = ONEDNN_PREFIX.sub("", op_type)
    return f"_{bare}" if bare != op_type and bare.startswith("Fused") else bare


def thread_kind(thread: str) -> str:
    """"data", "python" or "executor": what a thread (XLine name) runs."""
    if thread.startswith("tf_data"):
        return "data"
    return "python" if thread == "python" else "executor"


def _scopes(node: str) -> list[str]:
    return node.split("/")[:-1] + [node.rsplit("/", 1)[-1]]


def classify(thread: str, node: str, op_type: str) -> str:
    """The category of an op `node` of `op_type` that ran on `thread` (first rule that holds)."""
    kind = thread_kind(thread)
    if kind == "data" or base_type(op_type).startswith("IteratorGetNext"):
        return DATA
    if kind == "python":
        return EAGER
    scopes, bare = _scopes(node), base_type(op_type).lstrip("_")
    if bare == "Cast":
        return "casts"
    if bare == "TopKV2" or any(TOPK_SCOPE.match(s) for s in scopes):
        return "top-k"
    if any(EMA_SCOPE.search(s) for s in scopes):
        return "EMA"
    if any(OPTIMIZER_SCOPE.match(s) for s in scopes):
        return "optimizer (Adam, gradient norm)"
    if CONVOLUTION.search(bare):
        transposed = "transposed convolutions" if TRANSPOSED.search(node) else "convolutions"
        return f"{transposed}, {'backward' if 'gradient_tape/' in node else 'forward'}"
    if "MatMul" in bare:
        return "matmul (dense layers)"
    if "BatchNorm" in bare or any(NORMALISATION_SCOPE.search(s) for s in scopes):
        return "normalisation (batch norm)"
    if RESIZE_POOL.search(bare):
        return "resize and pooling"
    if bare.startswith("StatelessRandom") or bare.startswith("Random"):
        return "random numbers"
    if bare in ELEMENTWISE or bare.endswith("Grad"):
        return "activations, elementwise, reductions"
    return "other ops"


def op_kind(event: Event) -> OpKind | None:
    """The kind of an op event, None for any other event (and for function calls)."""
    match = OP_EVENT.match(event.name) or EAGER_EVENT.match(event.name)
    if match is None or event.function or FUNCTION_TYPE.match(match["type"]):
        return None
    node = match.groupdict().get("node") or "(eager)"
    return OpKind(classify(event.thread, node, match["type"]), match["type"])


def runtime_kind(event: Event) -> OpKind | None:
    """Where self time outside any op goes: the input pipeline, the executor, or (on the
    Python thread, which waits on the loop it called) nowhere."""
    kind = thread_kind(event.thread)
    if kind == "python":
        return None
    return OpKind(DATA if kind == "data" else RUNTIME, event.name)


def charged_self_times(events: Iterable[Event]) -> collections.Counter:
    """OpKind -> picoseconds: every event's self time, charged as the module docstring says:
    an op's to itself, a non-op event's to the innermost op enclosing it, else to
    `runtime_kind`; a function call's to nothing. Events on one thread nest (a child starts
    and ends within its parent); one that outlasts the open event is taken as its sibling."""
    charged: collections.Counter = collections.Counter()
    by_thread = collections.defaultdict(list)
    for event in events:
        by_thread[event.thread].append(event)
    for thread_events in by_thread.values():
        thread_events.sort(key=lambda e: (e.start_ps, -e.duration_ps))
        own = [e.duration_ps for e in thread_events]
        kinds: list[OpKind | None] = []
        enclosing_op: list[OpKind | None] = []  # per event: the innermost op it is or is in
        stack: list[int] = []  # indices of the open events
        for index, event in enumerate(thread_events):
            while stack and thread_events[stack[-1]].end_ps < event.end_ps:
                stack.pop()
            parent = stack[-1] if stack else None
            if parent is not None:
                own[parent] -= event.duration_ps
            inherited = enclosing_op[parent] if parent is not None else None
            kind = op_kind(event)
            if kind is None and not _is_function_call(event):
                kind = inherited or runtime_kind(event)
            kinds.append(kind)
            enclosing_op.append(op_kind(event) or inherited)
            stack.append(index)
        for kind, self_ps in zip(kinds, own):
            if kind is not None and self_ps > 0:
                charged[kind] += self_ps
    return charged


def _is_function_call(event: Event) -> bool:
    match = OP_EVENT.match(event.name) or EAGER_EVENT.match(event.name)
    return event.function or (match is not None and bool(FUNCTION_TYPE.match(match["type"])))


def count_ops(events: Iterable[Event], pattern: str) -> int:
    """How many op events ran an op type whose `base_type` matches `pattern` (a regex)."""
    compiled = re.compile(pattern)
    return sum(1 for event in events
               if (kind := op_kind(event)) is not None and compiled.search(base_type(kind.op_type)))


@dataclasses.dataclass(frozen=True)
class Breakdown:
    """Time per cycle, in milliseconds: by category, by (op type, category) (one op type, e.g.
    Conv2DBackpropInput, serves several: a transposed convolution's forward pass and a
    convolution's input gradient), and the total (the sum over threads)."""

    categories: dict[str, float]
    op_types: dict[tuple[str, str], float]
    total_ms: float


def breakdown(charged: collections.Counter, cycles: int) -> Breakdown:
    """`charged_self_times` per cycle, by category (in `CATEGORIES` order, empty ones left
    out) and by op type and category (largest first)."""
    per_cycle = {kind: ps / 1e9 / cycles for kind, ps in charged.items()}
    categories: collections.Counter = collections.Counter()
    for kind, ms in per_cycle.items():
        categories[kind.category] += ms
    ordered = {name: categories[name] for name in CATEGORIES if categories[name] > 0}
    op_types = {(kind.op_type, kind.category): ms
                for kind, ms in sorted(per_cycle.items(), key=lambda item: -item[1])}
    return Breakdown(ordered, op_types, sum(per_cycle.values()))


def markdown_categories(breakdown_: Breakdown) -> list[str]:
    """The category table: ms per cycle (summed over threads) and share of the total."""
    lines = ["| category | ms per cycle | share |", "| --- | ---: | ---: |"]
    for name, ms in breakdown_.categories.items():
        lines.append(f"| {name} | {ms:.2f} | {ms / breakdown_.total_ms:.1%} |")
    lines.append(f"| **total (all threads)** | **{breakdown_.total_ms:.2f}** | 100% |")
    return lines


def markdown_top_types(breakdown_: Breakdown, count: int = 15) -> list[str]:
    """The `count` (op type, category) pairs that took the most time."""
    lines = ["| op type (as run) | category | ms per cycle | share |",
             "| --- | --- | ---: | ---: |"]
    for (name, category), ms in list(breakdown_.op_types.items())[:count]:
        lines.append(f"| {name} | {category} | {ms:.2f} | {ms / breakdown_.total_ms:.1%} |")
    return lines


def function_call_ps(events: Iterable[Event], prefix: str) -> int:
    """Picoseconds the Python thread spent in calls of functions whose name starts with
    `prefix` ("EagerLocalExecute: __inference__loop_fn_123": the compiled loop)."""
    return sum(event.duration_ps for event in events
               if thread_kind(event.thread) == "python"
               and (match := EAGER_EVENT.match(event.name)) and match["type"].startswith(prefix))
