"""Feature extractors for the sample metrics: a network's features and class logits of images.

`FeatureExtractor` batches images through a forward function and says what it computes with:
`name`, the short id every metric key carries (`fid_domain`: see `trainers.evaluation.tags`),
`description` and `checksum`, which identify the network exactly (a SHA-256 of its file, or of
its weights). Two sources of forward functions live here, Keras models (`keras_features`) and
the standard FID Inception graph (`gan.inception`).

For a Keras model, one rule: when its last layer is a Dense layer, the features are that
layer's input and the logits its pre-activation output (Gantry's domain evaluator: 128-d
features and C logits; InceptionV3 with its top: 2048-d pool features and 1000 logits, whatever
the top's softmax); otherwise the model's output, flattened, is the features and there are no
logits (InceptionV3 without its top, average-pooled). Images go in as float32 NHWC in [-1, 1],
which is also Keras InceptionV3's own input scaling. When the model expects another size they
are resized (bilinear), and grayscale is repeated into the model's channels, so 28x28x1
Fashion-MNIST goes into InceptionV3 as 299x299x3.

Nothing here downloads: `keras.applications.InceptionV3(weights="imagenet")` would, so
`keras_inception_v3("imagenet")` only uses a weights file already in Keras' cache.
"""

from __future__ import annotations

import hashlib
import os
from typing import Callable

import keras
import numpy as np
import tensorflow as tf

KERAS_INCEPTION_FILES = {
    True: "inception_v3_weights_tf_dim_ordering_tf_kernels.h5",
    False: "inception_v3_weights_tf_dim_ordering_tf_kernels_notop.h5",
}
# A forward pass: float32 NHWC images in [-1, 1] -> (features [N, D], logits [N, C]; C may be 0).
Forward = Callable[[tf.Tensor], tuple[tf.Tensor, tf.Tensor]]


class FeatureExtractor:
    """Features [N, D] and class logits [N, C] of images, computed in batches of `batch_size`.

    `num_classes` is None when the network has no classification head; `logits` then raises.
    `name` is the id metric keys carry, `description` and `checksum` what the records say of
    the network. Forward passes run in inference mode, so an image's features do not depend
    on the rest of its batch.
    """

    def __init__(self, forward: Forward, *, feature_dim: int, num_classes: int | None,
                 name: str, description: str, checksum: str, batch_size: int = 250):
        if batch_size < 1:
            raise ValueError(f"FeatureExtractor batch_size must be >= 1, got {batch_size!r}.")
        self.feature_dim, self.num_classes = feature_dim, num_classes
        self.name, self.description, self.checksum = name, description, checksum
        self.batch_size = batch_size
        self._forward = tf.function(forward, reduce_retracing=True)

    def record(self) -> dict[str, str]:
        """What the features were computed on, for a run's records and `--mode=eval`'s JSON."""
        return {"name": self.name, "network": self.description, "checksum": self.checksum}

    def outputs(self, images) -> tuple[np.ndarray, np.ndarray | None]:
        """(features float32 [N, D], logits float32 [N, C] or None) in one pass over `images`."""
        images = tf.convert_to_tensor(images, tf.float32)
        if images.shape.rank != 4 or images.shape[0] == 0:
            raise ValueError(
                f"{self.description} takes a non-empty NHWC image batch, got shape "
                f"{tuple(images.shape)}."
            )
        features, logits = [], []
        for start in range(0, images.shape[0], self.batch_size):
            batch_features, batch_logits = self._forward(images[start : start + self.batch_size])
            features.append(batch_features.numpy())
            logits.append(batch_logits.numpy())
        return np.concatenate(features), (np.concatenate(logits) if self.num_classes else None)

    def features(self, images) -> np.ndarray:
        return self.outputs(images)[0]

    def logits(self, images) -> np.ndarray:
        if not self.num_classes:
            raise ValueError(
                f"{self.description} has no classification head (its last layer is not Dense): "
                "it gives features only."
            )
        return self.outputs(images)[1]


def keras_features(model: keras.Model, *, name: str = "custom", description: str = "",
                   checksum: str = "", batch_size: int = 250) -> FeatureExtractor:
    """A Keras model as the extractor, by the Dense-head rule of the module docstring;
    `checksum` defaults to `weights_checksum(model)`."""
    head = model.layers[-1]
    head = head if isinstance(head, keras.layers.Dense) else None
    body = keras.Model(model.inputs, head.input) if head else model
    input_shape = tuple(model.inputs[0].shape[1:])
    description = description or model.name

    def forward(images: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        features = body(_adapt(images, input_shape, description), training=False)
        features = tf.reshape(tf.cast(features, tf.float32), [tf.shape(features)[0], -1])
        if head is None:
            return features, tf.zeros([tf.shape(features)[0], 0])
        logits = tf.matmul(features, tf.cast(head.kernel, tf.float32))
        if head.use_bias:
            logits += tf.cast(head.bias, tf.float32)
        return features, logits

    return FeatureExtractor(
        forward, feature_dim=int(np.prod(body.outputs[0].shape[1:])),
        num_classes=head.units if head else None, name=name, description=description,
        checksum=checksum or weights_checksum(model), batch_size=batch_size)


def _adapt(images: tf.Tensor, input_shape: tuple, description: str) -> tf.Tensor:
    """`images` resized (bilinear) to the model's input size and grayscale repeated into its
    channels."""
    height, width, channels = input_shape
    if height is not None and tuple(images.shape[1:3]) != (height, width):
        images = tf.image.resize(images, (height, width), method="bilinear")
    if channels is None or images.shape[-1] == channels:
        return images
    if images.shape[-1] == 1:
        return tf.tile(images, [1, 1, 1, channels])
    raise ValueError(
        f"{description} takes {channels}-channel images, got {images.shape[-1]} "
        "channels; only grayscale is converted (by repeating it)."
    )


def weights_checksum(model: keras.Model) -> str:
    """A short hash of the model's weights: equal for equal networks, whatever the file."""
    digest = hashlib.sha256()
    for weight in model.get_weights():
        digest.update(np.ascontiguousarray(weight).tobytes())
    return digest.hexdigest()[:16]


def file_checksum(path: str) -> str:
    """The SHA-256 of the file at `path`, read in pieces (the Inception graph is ~96 MB)."""
    digest = hashlib.sha256()
    with tf.io.gfile.GFile(path, "rb") as file:
        for piece in iter(lambda: file.read(1 << 20), b""):
            digest.update(piece)
    return digest.hexdigest()


def load_feature_model(path: str, *, batch_size: int = 250) -> FeatureExtractor:
    """A Keras model file (.keras, or a whole-model .h5) as the extractor, by the Dense-head
    rule of the module docstring; metric keys name it "custom"."""
    if not path.endswith((".keras", ".h5")):
        raise ValueError(f"Feature model {path!r} must be a .keras or .h5 Keras model file.")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"Feature model {path!r} does not exist; give an existing file.")
    try:
        model = keras.models.load_model(path, compile=False)
    except (OSError, ValueError) as error:  # not a Keras zip / HDF5 model, or a damaged one
        raise ValueError(f"Feature model {path!r} cannot be loaded as a Keras model "
                         f"({str(error).splitlines()[0]}); give a model saved by Keras.") from None
    return keras_features(model, name="custom", description=f"feature model {path}",
                          checksum=file_checksum(path), batch_size=batch_size)


def keras_inception_v3(weights: str, *, batch_size: int = 50) -> FeatureExtractor:
    """Keras's ImageNet InceptionV3 with local weights: 2048-d pool features, plus 1000 logits
    when the file holds the top. `weights`: the .h5 weights file (Keras' file with or without
    top), or "imagenet" for one already in Keras' cache. Not the network of published FIDs
    (`gan.inception` is): its metric keys say `keras_inception_v3`."""
    path = cached_keras_inception_weights() if weights == "imagenet" else weights
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"InceptionV3 weights {path!r} do not exist; give the path of Keras' "
            f"{KERAS_INCEPTION_FILES[True]} (or the _notop file)."
        )
    import h5py

    with h5py.File(path, "r") as file:
        include_top = "predictions" in file
    model = keras.applications.InceptionV3(
        weights=path, include_top=include_top, pooling=None if include_top else "avg"
    )
    return keras_features(model, name="keras_inception_v3",
                          description=f"Keras InceptionV3 {path}", checksum=file_checksum(path),
                          batch_size=batch_size)


def cached_keras_inception_weights() -> str:
    """The InceptionV3 weights file Keras has cached (with top preferred); never downloads."""
    home = os.environ.get("KERAS_HOME") or os.path.join(os.path.expanduser("~"), ".keras")
    # Keras falls back to /tmp/.keras when its home is not writable.
    candidates = [
        os.path.join(base, "models", KERAS_INCEPTION_FILES[top])
        for top in (True, False)
        for base in (home, os.path.join("/tmp", ".keras"))
    ]
    for candidate in candidates:
        if os.path.isfile(candidate):
            return candidate
    raise FileNotFoundError(
        "InceptionV3 'imagenet' weights are not in Keras' cache (looked for "
        + ", ".join(candidates)
        + "), and Gantry does not download them. Copy the file there or pass its path with "
        "--keras_inception_weights, use the standard FID network (--evaluator=inception), or "
        "Gantry's domain evaluator (python run.py --mode=train_evaluator)."
    )
