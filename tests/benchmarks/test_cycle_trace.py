"""`benchmarks/cycle_trace.py`: profiler events -> time per op kind, on traces built by hand.

The events mimic what TensorFlow 2.21's host tracer writes for a training loop on a CPU
(executor threads with "node:OpType" events inside "ExecutorState::Process", helper events
inside ops, tf.data threads, the Python thread waiting on the compiled loop), so the rules the
profile's tables rest on are checked without running a profile.
"""

import pytest
from tensorflow.tsl.profiler.protobuf import xplane_pb2

from benchmarks import cycle_profile, cycle_trace
from benchmarks.cycle_trace import Event, OpKind

MS = 10 ** 9  # picoseconds


def kinds(charged):
    return {(kind.category, kind.op_type): ps / MS for kind, ps in charged.items()}


def test_self_time_goes_to_the_innermost_op_and_the_runtime_gets_the_gaps():
    compute = "tf_Compute/1"
    events = [
        Event(compute, "ExecutorState::Process", 0, 10 * MS),
        Event(compute, "while/discriminator_1/down1_lrelu_1/LeakyRelu:_MklNativeFusedConv2D",
              1 * MS, 4 * MS),
        Event(compute, "ParallelFor", 2 * MS, 1 * MS),  # the conv's sharded work: the conv's
        Event(compute, "while/generator_1/up0_bn_1/Cast:Cast", 6 * MS, 2 * MS),
    ]
    assert kinds(cycle_trace.charged_self_times(events)) == {
        ("convolutions, forward", "_MklNativeFusedConv2D"): 4.0,
        ("casts", "Cast"): 2.0,
        ("runtime (executor between kernels)", "ExecutorState::Process"): 4.0,
    }


def test_the_python_thread_counts_eager_ops_only_and_not_the_loop_it_waits_on():
    events = [
        Event("python", "TFE_Py_ExecuteCancelable", 0, 100 * MS),
        Event("python", "EagerExecute", 0, 100 * MS, function=True),
        Event("python", "EagerLocalExecute: __inference__loop_fn_3596", 1 * MS, 99 * MS),
        Event("python", "EagerExecute", 200 * MS, 3 * MS),
        Event("python", "EagerLocalExecute: WriteSummary", 200 * MS, 2 * MS),
        Event("tf_data_iterator_resource/7", "ParallelMapProduce", 5 * MS, 3 * MS),
        Event("tf_data_iterator_resource/7", "GatherV2:GatherV2", 6 * MS, 1 * MS),
    ]
    assert kinds(cycle_trace.charged_self_times(events)) == {
        ("eager ops between loops (summaries, controller)", "WriteSummary"): 2.0,
        ("data (tf.data threads)", "ParallelMapProduce"): 2.0,
        ("data (tf.data threads)", "GatherV2"): 1.0,
    }
    assert cycle_trace.function_call_ps(events, "__inference__loop_fn") == 99 * MS


def test_events_on_different_threads_do_not_nest_and_overlapping_ones_are_siblings():
    events = [Event("tf_Compute/1", "a/Mul:Mul", 0, 5 * MS),
              Event("tf_Compute/2", "b/Sub:Sub", 1 * MS, 2 * MS),
              Event("tf_Compute/1", "c/Relu:Relu", 4 * MS, 3 * MS)]  # starts before Mul ends
    assert kinds(cycle_trace.charged_self_times(events)) == {
        ("activations, elementwise, reductions", "Mul"): 5.0,
        ("activations, elementwise, reductions", "Sub"): 2.0,
        ("activations, elementwise, reductions", "Relu"): 3.0,
    }


@pytest.mark.parametrize("node, op_type, category", [
    ("while/generator_1/up0_1/conv_transpose", "_MklNativeConv2DBackpropInput",
     "transposed convolutions, forward"),
    ("gradient_tape/while/generator_3/up0_1/conv_transpose/Conv2DBackpropFilter",
     "_MklNativeConv2DBackpropFilter", "transposed convolutions, backward"),
    ("gradient_tape/while/discriminator_1/down1_1/convolution/Conv2DBackpropInput",
     "_MklNativeConv2DBackpropInput", "convolutions, backward"),
    ("while/discriminator_1/down1_lrelu_1/LeakyRelu", "_FusedConv2D", "convolutions, forward"),
    ("while/generator_1/seed_1/MatMul", "_MklMatMul", "matmul (dense layers)"),
    ("while/generator_1/up0_bn_1/batchnorm/mul_1", "Mul", "normalisation (batch norm)"),
    ("gradient_tape/while/generator/up0_bn0_1/Tile", "Tile", "normalisation (batch norm)"),
    ("while/generator_1/up0_bn_1/Cast", "Cast", "casts"),
    ("while/cond_2/then/_416/while/cond_2/adam_1/Sqrt_2", "Sqrt", "optimizer (Adam, gradient norm)"),
    ("while/global_norm_1/L2Loss", "L2Loss", "optimizer (Adam, gradient norm)"),
    ("while/argsort/TopKV2", "TopKV2", "top-k"),
    ("while/generator_ema/mul", "Mul", "EMA"),
    ("while/generator_1/up0_resize_1/ResizeNearestNeighbor", "ResizeNearestNeighbor",
     "resize and pooling"),
    ("while/generator_1/seed/StatelessRandomNormalV2", "StatelessRandomNormalV2", "random numbers"),
    ("gradient_tape/while/discriminator_1/down0_lrelu_1/LeakyReluGrad", "LeakyReluGrad",
     "activations, elementwise, reductions"),
    ("while/Pack", "Pack", "other ops"),
])
def test_classify(node, op_type, category):
    assert cycle_trace.classify("tf_Compute/1", node, op_type) == category


def test_base_type_drops_onednn_prefixes_and_counts_fused_convolutions():
    assert [cycle_trace.base_type(t) for t in ("_MklNativeFusedConv2D", "_FusedConv2D",
                                                "_MklMatMul", "_MklNativeConv2DWithBias", "Cast")
            ] == ["_FusedConv2D", "_FusedConv2D", "MatMul", "Conv2DWithBias", "Cast"]
    events = [Event("tf_Compute/1", "d/a/LeakyRelu:_MklNativeFusedConv2D", 0, MS),
              Event("tf_Compute/1", "d/b/LeakyRelu:_FusedConv2D", 2 * MS, MS),
              Event("tf_Compute/1", "g/conv_transpose:_MklNativeConv2DBackpropInput", 4 * MS, MS)]
    assert cycle_trace.count_ops(events, cycle_profile.FUSED_CONVOLUTION) == 2
    assert cycle_trace.count_ops(events, cycle_trace.CONVOLUTION.pattern) == 3


def test_read_events_from_an_xspace():
    space = xplane_pb2.XSpace()
    plane = space.planes.add(name="/host:CPU")
    plane.event_metadata[1].name = "x/Mul:Mul"
    plane.event_metadata[2].name = "EagerExecute"
    plane.stat_metadata[7].name = "is_func"
    compute = plane.lines.add(name="tf_Compute/1", timestamp_ns=1000)
    compute.events.add(metadata_id=1, offset_ps=500, duration_ps=2 * MS)
    python = plane.lines.add(name="python", timestamp_ns=0)
    call = python.events.add(metadata_id=2, offset_ps=0, duration_ps=9 * MS)
    call.stats.add(metadata_id=7, int64_value=1)
    space.planes.add(name="Task Environment")
    assert cycle_trace.read_events(space) == [
        Event("tf_Compute/1", "x/Mul:Mul", 1_000_500, 2 * MS),
        Event("python", "EagerExecute", 0, 9 * MS, function=True)]


def test_breakdown_per_cycle_in_table_order_and_top_types():
    charged = {OpKind("casts", "Cast"): 4 * MS, OpKind("convolutions, forward", "Conv2D"): 12 * MS,
               OpKind("normalisation (batch norm)", "Mul"): 2 * MS,
               OpKind("optimizer (Adam, gradient norm)", "Mul"): 2 * MS}
    result = cycle_trace.breakdown(charged, cycles=2)
    assert result.categories == {"convolutions, forward": 6.0, "normalisation (batch norm)": 1.0,
                                 "casts": 2.0, "optimizer (Adam, gradient norm)": 1.0}
    assert result.total_ms == 10.0
    assert list(result.op_types)[:2] == [("Conv2D", "convolutions, forward"), ("Cast", "casts")]
    assert cycle_trace.markdown_categories(result)[2] == "| convolutions, forward | 6.00 | 60.0% |"
    assert cycle_trace.markdown_top_types(result, 1)[2:] == [
        "| Conv2D | convolutions, forward | 6.00 | 60.0% |"]


def test_thread_table_medians_and_ratio_to_the_default():
    records = [{"intra": 0, "inter": 0, "ms_per_cycle": v} for v in (50.0, 40.0, 60.0)]
    records += [{"intra": 1, "inter": 1, "ms_per_cycle": v} for v in (100.0, 90.0, 80.0)]
    lines = cycle_profile.thread_table(records)
    assert lines[2:] == ["| 0 / 0 (default) | 50.0 | 50.0, 40.0, 60.0 | 1.00x |",
                         "| 1 / 1 | 90.0 | 100.0, 90.0, 80.0 | 0.56x |"]
