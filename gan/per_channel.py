"""A classifier of one-channel images applied to each channel of stacked images
(`datasets.stacked`): the domain evaluator of stacked_fashion_mnist, made from Fashion-MNIST's.

The model takes [H, W, C] images, runs the one-channel classifier's body on each channel (one
set of weights) and concatenates the C feature vectors: those are the features FID and its kin
compare. Its head is one Dense layer over them whose K^C logits are the joint class of the
channels: logit(c0, ..., c_{C-1}) = sum over channels i of the classifier's logit of class c_i
on channel i. The softmax of such a sum is the product of the channels' softmaxes, so the joint
class is the channels' classes treated as independent, and its argmax is the triple of the
channels' argmaxes, at index `datasets.stacked.mode_index` of the triple. A Dense head keeps
`gan.features`' one rule: the extractor's features are the head's input, its logits the head's
output, and the metrics that read logits (inception score, coverage, class KL) count modes.
"""

from __future__ import annotations

import keras
import numpy as np

from datasets import stacked


def per_channel_classifier(classifier: keras.Model, channels: int,
                           name: str = "per_channel_evaluator") -> keras.Model:
    """The `channels`-channel model of the module docstring around `classifier`, a one-channel
    model whose last layer is a Dense head of K logits."""
    head = classifier.layers[-1]
    if not isinstance(head, keras.layers.Dense) or classifier.inputs[0].shape[-1] != 1:
        raise ValueError(f"{classifier.name} must take one-channel images and end in a Dense "
                         "layer of class logits to classify each channel.")
    body = keras.Model(classifier.inputs, head.input, name=f"{classifier.name}_body")
    height, width, _ = classifier.inputs[0].shape[1:]
    images = keras.Input(shape=(height, width, channels), name="images")
    features = keras.layers.Concatenate(name="features")(
        [body(images[..., index : index + 1]) for index in range(channels)])
    kernel = np.asarray(head.kernel)
    num_classes = kernel.shape[1]
    bias = np.asarray(head.bias) if head.use_bias else np.zeros([num_classes], kernel.dtype)
    # Column m of the joint head adds, for each channel i, the head's column for class c_i of m.
    classes = stacked.mode_classes(np.arange(num_classes ** channels), num_classes, channels)
    joint_kernel = np.concatenate([kernel[:, classes[:, index]] for index in range(channels)])
    joint_bias = bias[classes].sum(axis=1)
    joint = keras.layers.Dense(num_classes ** channels, name="joint_logits")
    logits = joint(features)
    joint.set_weights([joint_kernel, joint_bias])
    return keras.Model(images, logits, name=name)
