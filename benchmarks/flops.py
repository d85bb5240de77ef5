"""FLOPs of a traced training step, counted from its graph, and the machine's matmul peak.

Counting method. Walk the concrete function's graph, and recursively the graphs of the
functions it calls (`tf.while_loop` bodies, `tf.cond` branches, `tf.function`s called from
inside, such as XLA-compiled pieces), and add up the matrix multiplications and convolutions:
`MatMul`/`BatchMatMul*` 2*M*N*K, `Conv2D` and its two gradients `Conv2DBackpropInput` (also a
transposed convolution's forward pass) and `Conv2DBackpropFilter` 2*N*Ho*Wo*Co*kh*kw*Ci each,
from the static shapes (multiply-adds count as two FLOPs; padded positions count). Element-wise
work (activations, batch norm, losses, the optimizer's update) is left out, as in the usual
model-FLOPs convention: it is a few percent of the arithmetic and not what a matmul peak
measures.

Only ops that execute are counted. A gradient tape also records the backward ops of paths
nobody asked for (the discriminator update differentiates through the generator, whose
variables the tape watches), and TensorFlow prunes such ops before running a function body:
an op counts when a function output, a control output or a stateful op (variable update,
iterator) depends on it, the rule `PruneFunctionBody` applies. A while loop's body counts once,
so a loop over training cycles gives the FLOPs of one cycle; a `tf.cond` counts its more
expensive branch (here: the branch that applies an update).
"""

from __future__ import annotations

import math
import time

import numpy as np
import tensorflow as tf

_CONVOLUTIONS = ("Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter")
_CALLS = ("PartitionedCall", "StatefulPartitionedCall")
_CONDITIONALS = ("If", "StatelessIf")
_LOOPS = ("While", "StatelessWhile")


def _shape(tensor: tf.Tensor) -> list[int]:
    shape = tensor.shape
    if not shape.is_fully_defined():
        raise ValueError(f"{tensor.name} has shape {shape}: FLOPs need static shapes "
                         "(batch with drop_remainder=True).")
    return shape.as_list()


def op_flops(op: tf.Operation) -> int:
    """FLOPs of one matmul or convolution op (0 for any other op)."""
    if op.type == "MatMul":
        a = _shape(op.inputs[0])
        inner = a[0] if op.get_attr("transpose_a") else a[1]
        return 2 * math.prod(_shape(op.outputs[0])) * inner
    if op.type.startswith("BatchMatMul"):
        a = _shape(op.inputs[0])
        inner = a[-2] if op.get_attr("adj_x") else a[-1]
        return 2 * math.prod(_shape(op.outputs[0])) * inner
    if op.type in _CONVOLUTIONS:
        # The (output) gradient tensor has the forward output's shape [N, Ho, Wo, Co]; the
        # filter is [kh, kw, Ci, Co] (an input of Conv2D/BackpropInput, the output of
        # BackpropFilter).
        forward_output = op.outputs[0] if op.type == "Conv2D" else op.inputs[2]
        kernel = _shape(op.outputs[0] if op.type == "Conv2DBackpropFilter" else op.inputs[1])
        return 2 * math.prod(_shape(forward_output)) * kernel[0] * kernel[1] * kernel[2]
    return 0


def _live_ops(graph) -> list[tf.Operation]:
    """The ops of `graph` that run: those an output, a control output or a stateful op needs."""
    roots = [tensor.op for tensor in graph.outputs]
    roots += list(getattr(graph, "control_outputs", []))
    roots += [op for op in graph.get_operations() if op._is_stateful]  # noqa: SLF001
    live, stack = set(), list(roots)
    while stack:
        op = stack.pop()
        if op in live:
            continue
        live.add(op)
        stack.extend(tensor.op for tensor in op.inputs)
        stack.extend(op.control_inputs)
    return [op for op in graph.get_operations() if op in live]


def graph_flops(graph) -> int:
    """FLOPs of one execution of `graph` (a loop body counted once), see the module doc."""
    total = 0
    for op in _live_ops(graph):
        if op.type in _LOOPS:
            total += graph_flops(op._body_graph)  # noqa: SLF001
        elif op.type in _CONDITIONALS:
            total += max(graph_flops(op._true_graph), graph_flops(op._false_graph))  # noqa: SLF001
        elif op.type in _CALLS:
            total += graph_flops(graph._get_function(op.get_attr("f").name).graph)  # noqa: SLF001
        else:
            total += op_flops(op)
    return total


def mlp_pair_hand_counts(*, batch: int, generator: list[int], discriminator: list[int]) -> dict:
    """Executed FLOPs of one cycle of each plain step on a pair of Dense chains, by hand.

    `generator` and `discriminator` list the layer widths from input to output. A Dense layer
    a -> b costs 2*batch*a*b in its forward pass, as much again for its weight gradient and
    again for its input gradient. D update: G forward (no gradient), D forward on real and on
    fake, D weight gradients and input gradients above D's first layer (neither input needs
    one). G update: G and D forward, input gradients through all of D, G weight gradients and
    input gradients above G's first layer. The fused step shares the G forward and the D
    forward passes between its two tapes; the rest is the same.
    """
    g = [2 * batch * a * b for a, b in zip(generator, generator[1:])]
    d = [2 * batch * a * b for a, b in zip(discriminator, discriminator[1:])]
    d_backward = sum(d) + sum(d[1:])
    g_backward = sum(g) + sum(g[1:])
    d_update = sum(g) + 2 * sum(d) + 2 * d_backward
    g_update = sum(g) + sum(d) + sum(d) + g_backward
    fused = sum(g) + 2 * sum(d) + 2 * d_backward + sum(d) + g_backward
    return {"alternating": d_update + g_update, "fused": fused}


def matmul_peak(dtype: tf.DType, *, size: int, repeats: int = 5) -> float:
    """FLOP/s of the best of `repeats` timed `size`x`size` matmuls in `dtype` (after warm-up)."""
    a = tf.cast(tf.random.stateless_normal([size, size], seed=[1, 1]), dtype)
    b = tf.cast(tf.random.stateless_normal([size, size], seed=[1, 2]), dtype)
    product = tf.function(lambda a, b: tf.reduce_sum(tf.cast(tf.matmul(a, b), tf.float32)))
    for _ in range(2):
        product(a, b).numpy()
    best = np.inf
    for _ in range(repeats):
        start = time.perf_counter()
        product(a, b).numpy()
        best = min(best, time.perf_counter() - start)
    return 2 * size ** 3 / best
