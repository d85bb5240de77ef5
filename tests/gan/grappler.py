"""The graph Grappler makes of a traced step, as TensorFlow runs it on this CPU: which kernels a
step really uses (fused or not) is decided there, after tracing, so a test reads it here."""

import tensorflow as tf
from tensorflow.core.protobuf import config_pb2
from tensorflow.python.grappler import cluster as grappler_cluster
from tensorflow.python.grappler import tf_optimizer

CPU = "/job:localhost/replica:0/task:0/device:CPU:0"


def optimized_nodes(function, *specs) -> list:
    """The NodeDefs, functions' bodies included, of `function` traced for `specs` after
    Grappler's default passes, every node placed on the CPU (as the runtime places them)."""
    concrete = function.get_concrete_function(*specs)
    graph = concrete.graph
    meta_graph = tf.compat.v1.train.export_meta_graph(graph_def=graph.as_graph_def(), graph=graph)
    meta_graph.collection_def["train_op"].node_list.value.extend(
        tensor.name for tensor in concrete.outputs)
    for node in meta_graph.graph_def.node:
        node.device = CPU
    for library_function in meta_graph.graph_def.library.function:
        for node in library_function.node_def:
            node.device = CPU
    optimized = tf_optimizer.OptimizeGraph(config_pb2.ConfigProto(), meta_graph,
                                           cluster=grappler_cluster.Cluster())
    return [*optimized.node, *(node for body in optimized.library.function
                               for node in body.node_def)]
