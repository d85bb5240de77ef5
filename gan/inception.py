"""The standard FID Inception network: the 2015-12-05 TensorFlow Inception graph behind
published FIDs (TTUR, TF-GAN, pytorch-fid and OpenAI's evaluation all compute on it).

The network is the frozen GraphDef `classify_image_graph_def.pb` of TensorFlow's
`inception-2015-12-05.tgz`, checked by its SHA-256 before use: FIDs are comparable only on the
same weights, and a graph that merely has the same tensor names would give other numbers.
It is downloaded once into Gantry's cache where the network allows (`ensure_graph`), or read
from a file a user brings (the .pb or the .tgz).

Images go in as TTUR feeds them: values 0..255 at any size into the graph's `ExpandDims:0`,
after which the graph itself resizes to 299x299 (its own bilinear ResizeBilinear) and scales
to [-1, 1]. Gantry's images in [-1, 1] are first quantised to the 256 levels a saved PNG holds,
as the published numbers were computed on saved images; grayscale is repeated into RGB.
Features are `pool_3` (2048-d). Logits are `pool_3` times the softmax layer's weights without
its bias, over its 1008 outputs: the Inception Score of Salimans et al. (2016), which TTUR and
StyleGAN's metrics reproduce.
"""

from __future__ import annotations

import os
import tarfile

import tensorflow as tf

from datasets import files
from gan.features import FeatureExtractor, file_checksum

GRAPH_URL = "http://download.tensorflow.org/models/image/imagenet/inception-2015-12-05.tgz"
GRAPH_MEMBER = "classify_image_graph_def.pb"
GRAPH_SHA256 = "009d6814d1bc560d4e7b236e170e9b2d5ca6f4b57bd8037f6db05776204415c6"
GRAPH_BYTES = 95_673_916
INPUT, FEATURES_NODE, SOFTMAX_MATMUL = "ExpandDims:0", "pool_3", "softmax/logits/MatMul"
FEATURE_DIM, NUM_CLASSES = 2048, 1008


class GraphError(ValueError):
    """The Inception graph is missing, cannot be fetched, or is not the standard one."""


def ensure_graph(path: str = "", *, cache_dir: str | None = None) -> str:
    """The path of a checked standard graph: `path` itself (a .pb), the graph extracted from
    `path` (a .tgz) into the cache, or with no `path` the cached graph, downloaded and
    extracted first when it is not there. GraphError when it cannot be had or its SHA-256 is
    not GRAPH_SHA256."""
    cache_dir = cache_dir or files.user_cache_dir("inception")
    cached = os.path.join(cache_dir, GRAPH_MEMBER)
    path = os.path.expanduser(path)
    if path and not path.endswith((".tgz", ".tar.gz")):
        if not os.path.isfile(path):
            raise GraphError(f"{path} does not exist; give the path of {GRAPH_MEMBER} or of "
                             f"the archive holding it ({os.path.basename(GRAPH_URL)}).")
        return _checked(path)
    if not os.path.isfile(cached):
        archive = path or _download(cache_dir)
        _extract(archive, cached)
        if not path:
            os.remove(archive)
    return _checked(cached)


def _download(cache_dir: str) -> str:
    """The archive at GRAPH_URL, fetched into `cache_dir` (Keras's downloader); GraphError
    saying how to bring the file by hand when there is no network."""
    import keras

    try:
        return keras.utils.get_file(os.path.basename(GRAPH_URL), GRAPH_URL, cache_dir=cache_dir,
                                    cache_subdir="")
    except Exception as error:  # get_file raises bare Exceptions for HTTP and URL errors
        raise GraphError(
            f"The standard Inception graph could not be downloaded from {GRAPH_URL} "
            f"({error}). On a machine without network access, download that file elsewhere and "
            "give it, or the classify_image_graph_def.pb inside it, with --inception_graph=FILE."
        ) from None


def _extract(archive: str, target: str) -> None:
    """Writes the graph member of `archive` to `target` (atomically, by a rename)."""
    try:
        with tarfile.open(archive) as tar:
            member = next((m for m in tar.getmembers()
                           if os.path.basename(m.name) == GRAPH_MEMBER and m.isfile()), None)
            if member is None:
                raise GraphError(f"{archive} holds no {GRAPH_MEMBER}; give "
                                 f"{os.path.basename(GRAPH_URL)} or the graph file itself.")
            os.makedirs(os.path.dirname(target), exist_ok=True)
            partial = f"{target}.{os.getpid()}.partial"
            with tar.extractfile(member) as source, open(partial, "wb") as destination:
                for piece in iter(lambda: source.read(1 << 20), b""):
                    destination.write(piece)
    except (OSError, tarfile.TarError) as error:
        raise GraphError(f"{archive} cannot be read as a .tgz archive ({error}); give "
                         f"{os.path.basename(GRAPH_URL)} or the graph file itself.") from None
    os.replace(partial, target)


def _checked(path: str) -> str:
    digest = file_checksum(path)
    if digest != GRAPH_SHA256:
        raise GraphError(
            f"{path} is not the standard FID Inception graph: its SHA-256 is {digest}, the "
            f"standard {GRAPH_MEMBER} ({GRAPH_BYTES:,} bytes, from {GRAPH_URL}) has "
            f"{GRAPH_SHA256}. "
            "FIDs on other weights are not comparable with published ones; give the standard "
            "file, or evaluate on your own network with --evaluator=MODEL.keras.")
    return path


def inception_features(graph: str = "", *, cache_dir: str | None = None,
                       batch_size: int = 50) -> FeatureExtractor:
    """The extractor of the standard graph `ensure_graph(graph)` finds and checks (see the
    module docstring); the ~96 MB file is hashed once."""
    path = ensure_graph(graph, cache_dir=cache_dir)
    graph_def = tf.compat.v1.GraphDef()
    with tf.io.gfile.GFile(path, "rb") as file:
        graph_def.ParseFromString(file.read())
    # Only pool_3 and the softmax weights are read: the graph's own reshape of pool_3 to
    # [1, 2048] (the graph classifies one image) would refuse a batch, so it is cut away.
    matmul = next(node for node in graph_def.node if node.name == SOFTMAX_MATMUL)
    weights = matmul.input[1]
    kept = tf.compat.v1.graph_util.extract_sub_graph(graph_def, [FEATURES_NODE, weights])

    def imported(images: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        pool, softmax_weights = tf.compat.v1.import_graph_def(
            kept, input_map={INPUT: images}, return_elements=[f"{FEATURES_NODE}:0", f"{weights}:0"],
            name="inception")
        features = tf.reshape(pool, [-1, FEATURE_DIM])
        return features, tf.matmul(features, softmax_weights)

    network = tf.compat.v1.wrap_function(
        imported, [tf.TensorSpec([None, None, None, 3], tf.float32)])

    def forward(images: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        if images.shape[-1] not in (1, 3):
            raise ValueError(f"The Inception network takes RGB or grayscale images, got "
                             f"{images.shape[-1]} channels.")
        levels = tf.round(tf.clip_by_value((images + 1.0) * 127.5, 0.0, 255.0))
        if images.shape[-1] == 1:
            levels = tf.tile(levels, [1, 1, 1, 3])
        return network(levels)

    return FeatureExtractor(forward, feature_dim=FEATURE_DIM, num_classes=NUM_CLASSES,
                            name="inception", description=f"Inception 2015-12-05 graph {path}",
                            checksum=GRAPH_SHA256, batch_size=batch_size)
