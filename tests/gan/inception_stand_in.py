"""A stand-in for the standard FID Inception graph: a small frozen GraphDef with the tensor
names and shapes Gantry reads from `classify_image_graph_def.pb` (`gan.inception`), so the
whole path (file, archive, download, import, features, logits) is tested without the 96 MB
graph or a network.

Like the real graph it decodes a JPEG into `ExpandDims` ([1, H, W, 3], values 0..255), resizes
to 299x299 itself, scales to [-1, 1], and ends in `pool_3` ([N, 1, 1, 2048]), whose reshape to
[1, 2048] feeds `softmax/logits/MatMul` (weights [2048, 1008]) plus a bias. Its features are a
random convolution's tanh, average-pooled: a nonlinear function of the image, so FIDs of
different image sets differ.
"""

import functools
import hashlib
import io
import os
import tarfile

import numpy as np
import tensorflow as tf

from gan import inception


def stand_in_graph_def() -> tf.compat.v1.GraphDef:
    graph_def = tf.compat.v1.GraphDef()
    graph_def.ParseFromString(stand_in_bytes())
    return graph_def


@functools.lru_cache(maxsize=1)
def stand_in_bytes() -> bytes:
    """The stand-in's file contents, built once per process (a graph serialised twice may order
    its attributes differently)."""
    rng = np.random.default_rng(0)
    graph = tf.Graph()
    with graph.as_default():
        contents = tf.compat.v1.placeholder(tf.string, [], name="DecodeJpeg/contents")
        pixels = tf.cast(tf.io.decode_jpeg(contents, channels=3, name="DecodeJpeg"), tf.float32)
        expanded = tf.expand_dims(pixels, 0, name="ExpandDims")
        resized = tf.compat.v1.image.resize_bilinear(expanded, [299, 299], name="ResizeBilinear")
        scaled = tf.multiply(tf.subtract(resized, 128.0, name="Sub"), 1 / 128.0, name="Mul")
        kernel = tf.constant(rng.normal(0.0, 0.05, (13, 13, 3, 2048)).astype(np.float32))
        convolved = tf.nn.conv2d(scaled, kernel, strides=13, padding="VALID")  # 23x23
        pool = tf.nn.avg_pool2d(tf.tanh(convolved), ksize=23, strides=1, padding="VALID",
                                name="pool_3")
        flat = tf.reshape(pool, [1, 2048], name="pool_3/_reshape")
        weights = tf.constant(rng.normal(0.0, 0.5, (2048, 1008)).astype(np.float32),
                              name="softmax/weights")
        biases = tf.constant(rng.normal(0.0, 1.0, 1008).astype(np.float32), name="softmax/biases")
        logits = tf.nn.bias_add(tf.matmul(flat, weights, name="softmax/logits/MatMul"), biases,
                                name="softmax/logits")
        tf.nn.softmax(logits, name="softmax")
    return graph.as_graph_def().SerializeToString()


def write_stand_in(directory) -> tuple[str, str]:
    """Writes the stand-in as DIRECTORY/classify_image_graph_def.pb and, holding it as the real
    archive does, DIRECTORY/inception-2015-12-05.tgz; returns (graph path, archive path)."""
    data = stand_in_bytes()
    graph = os.path.join(str(directory), inception.GRAPH_MEMBER)
    with open(graph, "wb") as file:
        file.write(data)
    archive = os.path.join(str(directory), os.path.basename(inception.GRAPH_URL))
    with tarfile.open(archive, "w:gz") as tar:
        for name, payload in (("LICENSE", b"stand-in"), (inception.GRAPH_MEMBER, data)):
            member = tarfile.TarInfo(name)
            member.size = len(payload)
            tar.addfile(member, io.BytesIO(payload))
    return graph, archive


def stand_in_sha256() -> str:
    return hashlib.sha256(stand_in_bytes()).hexdigest()
