"""Feature extractors for the sample metrics: any Keras model, as features and class logits.

One rule for every model: when its last layer is a Dense layer, the features are that layer's
input and the logits its pre-activation output (Gantry's domain evaluator: 128-d features and C
logits; InceptionV3 with its top: 2048-d pool features and 1000 logits, whatever the top's
softmax); otherwise the model's output, flattened, is the features and there are no logits
(InceptionV3 without its top, average-pooled).

Images go in as float32 NHWC in [-1, 1], which is also InceptionV3's own input scaling. When the
model expects another size they are resized (bilinear), and grayscale is repeated into the
model's channels, so 28x28x1 Fashion-MNIST goes into InceptionV3 as 299x299x3.

Nothing here downloads: `keras.applications.InceptionV3(weights="imagenet")` would, so
`inception_v3("imagenet")` only uses a weights file already in Keras' cache.
"""

from __future__ import annotations

import os

import keras
import numpy as np
import tensorflow as tf

INCEPTION_FILES = {
    True: "inception_v3_weights_tf_dim_ordering_tf_kernels.h5",
    False: "inception_v3_weights_tf_dim_ordering_tf_kernels_notop.h5",
}


class FeatureExtractor:
    """Features [N, D] and class logits [N, C] of images, computed in batches of `batch_size`.

    `num_classes` is None when the model has no Dense head; `logits` then raises. The forward
    pass runs in inference mode (batch norm uses its moving statistics), so an image's features
    do not depend on the rest of its batch.
    """

    def __init__(self, model: keras.Model, *, batch_size: int = 250, description: str = ""):
        if batch_size < 1:
            raise ValueError(f"FeatureExtractor batch_size must be >= 1, got {batch_size!r}.")
        head = model.layers[-1]
        self._head = head if isinstance(head, keras.layers.Dense) else None
        self._body = keras.Model(model.inputs, head.input) if self._head else model
        self.model = model
        self.input_shape = tuple(model.inputs[0].shape[1:])
        self.feature_dim = int(np.prod(self._body.outputs[0].shape[1:]))
        self.num_classes = self._head.units if self._head else None
        self.batch_size = batch_size
        self.description = description or model.name
        self._forward = tf.function(self._forward_batch, reduce_retracing=True)

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
        return np.concatenate(features), (np.concatenate(logits) if self._head else None)

    def features(self, images) -> np.ndarray:
        return self.outputs(images)[0]

    def logits(self, images) -> np.ndarray:
        if self._head is None:
            raise ValueError(
                f"{self.description} has no classification head (its last layer is not Dense): "
                "it gives features only."
            )
        return self.outputs(images)[1]

    def _forward_batch(self, images: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        features = self._body(self._adapt(images), training=False)
        features = tf.reshape(tf.cast(features, tf.float32), [tf.shape(features)[0], -1])
        if self._head is None:
            return features, tf.zeros([tf.shape(features)[0], 0])
        logits = tf.matmul(features, tf.cast(self._head.kernel, tf.float32))
        if self._head.use_bias:
            logits += tf.cast(self._head.bias, tf.float32)
        return features, logits

    def _adapt(self, images: tf.Tensor) -> tf.Tensor:
        height, width, channels = self.input_shape
        if height is not None and tuple(images.shape[1:3]) != (height, width):
            images = tf.image.resize(images, (height, width), method="bilinear")
        if channels is None or images.shape[-1] == channels:
            return images
        if images.shape[-1] == 1:
            return tf.tile(images, [1, 1, 1, channels])
        raise ValueError(
            f"{self.description} takes {channels}-channel images, got {images.shape[-1]} "
            "channels; only grayscale is converted (by repeating it)."
        )


def load_feature_model(path: str, *, batch_size: int = 250) -> FeatureExtractor:
    """A Keras model file (.keras, or a whole-model .h5) as the extractor, by the Dense-head
    rule of the module docstring."""
    if not path.endswith((".keras", ".h5")):
        raise ValueError(f"Feature model {path!r} must be a .keras or .h5 Keras model file.")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"Feature model {path!r} does not exist; give an existing file.")
    try:
        model = keras.models.load_model(path, compile=False)
    except (OSError, ValueError) as error:  # not a Keras zip / HDF5 model, or a damaged one
        raise ValueError(f"Feature model {path!r} cannot be loaded as a Keras model "
                         f"({str(error).splitlines()[0]}); give a model saved by Keras.") from None
    return FeatureExtractor(model, batch_size=batch_size, description=f"feature model {path}")


def inception_v3(weights: str, *, batch_size: int = 50) -> FeatureExtractor:
    """InceptionV3 with local weights: 2048-d pool features, plus 1000 logits when the file
    holds the top. `weights`: the .h5 weights file (Keras' file with or without top), or
    "imagenet" for one already in Keras' cache."""
    path = cached_inception_weights() if weights == "imagenet" else weights
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"InceptionV3 weights {path!r} do not exist; give the path of Keras' "
            f"{INCEPTION_FILES[True]} (or the _notop file)."
        )
    import h5py

    with h5py.File(path, "r") as file:
        include_top = "predictions" in file
    model = keras.applications.InceptionV3(
        weights=path, include_top=include_top, pooling=None if include_top else "avg"
    )
    return FeatureExtractor(model, batch_size=batch_size, description=f"InceptionV3 {path}")


def cached_inception_weights() -> str:
    """The InceptionV3 weights file Keras has cached (with top preferred); never downloads."""
    home = os.environ.get("KERAS_HOME") or os.path.join(os.path.expanduser("~"), ".keras")
    # Keras falls back to /tmp/.keras when its home is not writable.
    candidates = [
        os.path.join(base, "models", INCEPTION_FILES[top])
        for top in (True, False)
        for base in (home, os.path.join("/tmp", ".keras"))
    ]
    for candidate in candidates:
        if os.path.isfile(candidate):
            return candidate
    raise FileNotFoundError(
        "InceptionV3 'imagenet' weights are not in Keras' cache (looked for "
        + ", ".join(candidates)
        + "), and Gantry does not download them. Copy the file there or pass its path, or use "
        "Gantry's domain evaluator (python run.py --mode=train_evaluator)."
    )
