"""Class-conditional networks and the auxiliary-classifier loss.

Two ways to condition a GAN on a class label y in [0, num_classes):
- cGAN with a projection discriminator (Miyato & Koyama 2018): the generator's batch norms
  take their scale and shift from the class (`ConditionalBatchNorm`), and the discriminator
  adds the inner product of a class embedding with its features to its unconditional logit.
- AC-GAN (Odena et al. 2017): the generator sees the label one-hot next to its noise, and the
  discriminator has a second head that classifies the image.

Every builder here is the DCGAN network of `gan.networks` with the conditioning added (the
ResNet ones of `gan.resnet` reuse the layers and heads defined here), so a
conditional run differs from the matching unconditional one only in the conditioning: the
generators re-apply the layers of a `networks.dcgan_generator` (which is a plain chain of
layers) to new inputs, and the discriminators add heads on the features of a
`networks.dcgan_discriminator` (its "flatten" layer). Labels are integer tensors of shape
(batch,) in [0, num_classes); any other label selects no class (an all-zero one-hot row).
"""

from __future__ import annotations

import keras
import tensorflow as tf

from gan import networks


@keras.saving.register_keras_serializable(package="gantry")
class ConditionalBatchNorm(keras.layers.Layer):
    """Batch norm whose affine transform is chosen by the class: gamma[y] * x_hat + beta[y].

    Called on ``[features, labels]`` with features (batch, ..., channels) and labels (batch,).
    x_hat is computed by a synchronized `BatchNormalization` without its own scale and shift,
    so the statistics are those of the global batch, as in the DCGAN generator; the per-class
    gamma (initialised to 1) and beta (to 0) are rows of two (num_classes, channels) tables,
    so at initialisation the layer is exactly a plain batch norm.
    """

    def __init__(self, num_classes: int, **kwargs):
        super().__init__(**kwargs)
        if num_classes < 1:
            raise ValueError(f"ConditionalBatchNorm needs num_classes >= 1, got {num_classes!r}.")
        self.num_classes = num_classes
        self.normalize = keras.layers.BatchNormalization(
            synchronized=True, center=False, scale=False, name="normalize")

    def build(self, input_shape):
        features_shape, _ = input_shape
        self.normalize.build(features_shape)
        channels = features_shape[-1]
        self.gamma = self.add_weight(shape=(self.num_classes, channels), initializer="ones",
                                     name="gamma")
        self.beta = self.add_weight(shape=(self.num_classes, channels), initializer="zeros",
                                    name="beta")

    def call(self, inputs, training=None):
        features, labels = inputs
        normalized = self.normalize(features, training=training)
        # Rows picked by a one-hot product rather than a gather: a gather's gradient is an
        # IndexedSlices, which the trainer's dense gradient arithmetic does not take.
        one_hot = keras.ops.one_hot(keras.ops.cast(labels, "int32"), self.num_classes,
                                    dtype=self.gamma.dtype)
        # One (batch, 1, ..., 1, channels) row per example, broadcast over the spatial axes.
        shape = (-1,) + (1,) * (len(features.shape) - 2) + (features.shape[-1],)
        gamma = keras.ops.reshape(keras.ops.matmul(one_hot, self.gamma), shape)
        beta = keras.ops.reshape(keras.ops.matmul(one_hot, self.beta), shape)
        return (normalized * keras.ops.cast(gamma, normalized.dtype)
                + keras.ops.cast(beta, normalized.dtype))

    def compute_output_shape(self, input_shape):
        return input_shape[0]

    def get_config(self):
        return {**super().get_config(), "num_classes": self.num_classes}


def labels_input() -> keras.KerasTensor:
    return keras.Input(shape=(), dtype="int32", name="labels")


def one_hot(labels: keras.KerasTensor, num_classes: int) -> keras.KerasTensor:
    return keras.layers.CategoryEncoding(num_tokens=num_classes, output_mode="one_hot",
                                         name="one_hot")(labels)


def require_classes(num_classes: int) -> None:
    if num_classes < 1:
        raise ValueError(f"num_classes must be >= 1, got {num_classes!r}; a conditional GAN "
                         "needs a labelled dataset.")


def conditional_generator(*, resolution: int, channels: int, latent_dim: int, num_classes: int,
                          width: int = 64, extra_blocks: int = 0, upsample: str = "transposed",
                          name: str = "generator") -> keras.Model:
    """The DCGAN generator with every batch norm made a `ConditionalBatchNorm` (cGAN).

    Inputs ``[latents (batch, latent_dim), labels (batch,)]``; output images in [-1, 1]. The
    label enters only through the per-class scale and shift of each normalization, as in
    Miyato & Koyama (2018); layer names are the DCGAN generator's.
    """
    require_classes(num_classes)
    body = networks.dcgan_generator(resolution=resolution, channels=channels,
                                    latent_dim=latent_dim, width=width, extra_blocks=extra_blocks,
                                    upsample=upsample, name=name)
    latents, labels = keras.Input(shape=(latent_dim,), name="latents"), labels_input()
    x = latents
    for layer in body.layers[1:]:
        if isinstance(layer, keras.layers.BatchNormalization):
            x = ConditionalBatchNorm(num_classes, name=layer.name)([x, labels])
        else:
            x = layer(x)
    return keras.Model([latents, labels], x, name=name)


def acgan_generator(*, resolution: int, channels: int, latent_dim: int, num_classes: int,
                    width: int = 64, extra_blocks: int = 0, upsample: str = "transposed",
                    name: str = "generator") -> keras.Model:
    """The DCGAN generator fed the noise concatenated with the one-hot label (AC-GAN).

    Inputs ``[latents (batch, latent_dim), labels (batch,)]``; the seed layer sees
    latent_dim + num_classes inputs, everything after it is the DCGAN generator unchanged.
    """
    require_classes(num_classes)
    body = networks.dcgan_generator(resolution=resolution, channels=channels,
                                    latent_dim=latent_dim + num_classes, width=width,
                                    extra_blocks=extra_blocks, upsample=upsample, name=name)
    latents, labels = keras.Input(shape=(latent_dim,), name="latents"), labels_input()
    x = keras.layers.Concatenate(name="latents_and_label")([latents, one_hot(labels, num_classes)])
    for layer in body.layers[1:]:
        x = layer(x)
    return keras.Model([latents, labels], x, name=name)


def projection_discriminator(*, resolution: int, channels: int, num_classes: int, width: int = 64,
                             normalization: str = "none", spectral_norm: bool = True,
                             dropout: float = 0.0, extra_blocks: int = 0,
                             name: str = "discriminator") -> keras.Model:
    """Projection discriminator: logit = psi(phi(x)) + <embed(y), phi(x)> (Miyato & Koyama 2018).

    phi is the DCGAN discriminator up to its flattened features and psi its logits layer, so
    without the projection term this is exactly `networks.dcgan_discriminator` (with its
    `spectral_norm`). The embedding is a bias-free Dense layer "embed" on the one-hot label
    (row y of its kernel is embed(y)) and, unlike in the paper's code, is NOT spectrally
    normalized: capping its largest singular value at 1 slows how fast the class term can
    grow, and on Fashion-MNIST the samples' class accuracy after 3000 cycles was 73% with it
    and 83% without (benchmarks/results/conditional.md). Inputs ``[images, labels]``; output float32
    logits (batch, 1).
    """
    require_classes(num_classes)
    body = networks.dcgan_discriminator(resolution=resolution, channels=channels, width=width,
                                        normalization=normalization, spectral_norm=spectral_norm,
                                        dropout=dropout, extra_blocks=extra_blocks, name=name)
    return add_projection(body, body.get_layer("flatten").output, num_classes)


def add_projection(body: keras.Model, features: keras.KerasTensor,
                   num_classes: int) -> keras.Model:
    """`body` (images -> logits) with the projection term <embed(y), features> added to its
    logits; inputs ``[images, labels]``. The embedding is not spectrally normalized (see
    `projection_discriminator`)."""
    labels = labels_input()
    embedding = keras.layers.Dense(features.shape[-1], use_bias=False, dtype="float32",
                                   name="embed")(one_hot(labels, num_classes))
    projection = keras.layers.Dot(axes=1, dtype="float32", name="projection")([embedding, features])
    logits = keras.layers.Add(dtype="float32", name="conditional_logits")([body.output, projection])
    return keras.Model([body.input, labels], logits, name=body.name)


def acgan_discriminator(*, resolution: int, channels: int, num_classes: int, width: int = 64,
                        normalization: str = "none", spectral_norm: bool = False,
                        dropout: float = 0.0, extra_blocks: int = 0,
                        name: str = "discriminator") -> keras.Model:
    """The DCGAN discriminator with a second, class head on its features (AC-GAN).

    Input images; outputs ``[logits (batch, 1), class_logits (batch, num_classes)]``, both
    float32. The class head is spectrally normalized when `spectral_norm` is.
    """
    require_classes(num_classes)
    body = networks.dcgan_discriminator(resolution=resolution, channels=channels, width=width,
                                        normalization=normalization, spectral_norm=spectral_norm,
                                        dropout=dropout, extra_blocks=extra_blocks, name=name)
    return add_class_head(body, body.get_layer("flatten").output, num_classes,
                          spectral_norm=spectral_norm)


def add_class_head(body: keras.Model, features: keras.KerasTensor, num_classes: int, *,
                   spectral_norm: bool) -> keras.Model:
    """`body` (images -> logits) with a Dense class head on `features`, spectrally normalized
    when `spectral_norm`; outputs ``[logits, class_logits]``, both float32."""
    class_logits = networks.spectral(
        keras.layers.Dense(num_classes, dtype="float32", name="class_logits"),
        spectral_norm)(features)
    return keras.Model(body.input, [body.output, class_logits], name=body.name)


def classification_loss(labels: tf.Tensor, class_logits: tf.Tensor) -> tf.Tensor:
    """Per-example softmax cross-entropy of the class head, float32, shape (batch,)."""
    return tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=tf.cast(labels, tf.int32), logits=tf.cast(class_logits, tf.float32))


def classification_accuracy(labels: tf.Tensor, class_logits: tf.Tensor) -> tf.Tensor:
    """Per-example 1.0 where the class head's arg-max is the label, else 0.0, shape (batch,)."""
    predicted = tf.argmax(class_logits, axis=-1, output_type=tf.int32)
    return tf.cast(tf.equal(predicted, tf.cast(labels, tf.int32)), tf.float32)
