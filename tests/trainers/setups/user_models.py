"""Users' own networks for the tests of `--generator`/`--discriminator` and the Python API.

Tests import it as `tests.trainers.setups.user_models`, or copy this file into a temporary
directory under another name, so that a later process can be started without it (sample and
export must not need it). Tiny widths: the networks only have to train for a few cycles.
"""

import keras

WIDTH = 4


@keras.saving.register_keras_serializable(package="user_models")
class Scale(keras.layers.Layer):
    """A custom layer (one learned scalar) that only this module defines."""

    def build(self, input_shape):
        self.scale = self.add_weight(shape=(), initializer="ones", name="scale")

    def call(self, inputs):
        return inputs * self.scale


def _conditioned(noise, latent_dim: int, num_classes: int):
    """(model inputs, the noise with the label's embedding added when conditional)."""
    if not num_classes:
        return noise, noise
    labels = keras.Input(shape=(), dtype="int32")
    return [noise, labels], keras.layers.Add()([noise, keras.layers.Embedding(num_classes, latent_dim)(labels)])


def make_generator(latent_dim, shape, num_classes, classifier):
    """Noise [N, latent_dim] (and labels) -> [N, *shape] in [-1, 1]."""
    del classifier
    noise = keras.Input(shape=(latent_dim,))
    inputs, x = _conditioned(noise, latent_dim, num_classes)
    if len(shape) == 1:
        x = keras.layers.Dense(8, activation="relu")(x)
        outputs = keras.layers.Dense(shape[0])(x)
    else:
        side, _, channels = shape
        x = keras.layers.Dense((side // 4) ** 2 * WIDTH, activation="relu")(x)
        x = keras.layers.Reshape((side // 4, side // 4, WIDTH))(x)
        x = keras.layers.Conv2DTranspose(WIDTH, 4, strides=2, padding="same", activation="relu")(x)
        outputs = keras.layers.Conv2DTranspose(channels, 4, strides=2, padding="same",
                                               activation="tanh")(x)
    return keras.Model(inputs, outputs)


def make_discriminator(latent_dim, shape, num_classes, classifier, custom_layer=False):
    """Examples [N, *shape] (and labels, unless `classifier`) -> logits [N, 1] (and class
    logits [N, num_classes] with `classifier`)."""
    del latent_dim
    examples = keras.Input(shape=shape)
    x = keras.layers.Flatten()(examples) if len(shape) > 1 else examples
    x = keras.layers.Dense(8, activation="relu")(x)
    if custom_layer:
        x = Scale()(x)
    logits = keras.layers.Dense(1)(x)
    if classifier:
        return keras.Model(examples, [logits, keras.layers.Dense(num_classes)(x)])
    if num_classes:
        labels = keras.Input(shape=(), dtype="int32")
        projection = keras.layers.Dot(axes=1)([keras.layers.Embedding(num_classes, 8)(labels), x])
        return keras.Model([examples, labels], keras.layers.Add()([logits, projection]))
    return keras.Model(examples, logits)


def make_discriminator_with_custom_layer(**arguments):
    return make_discriminator(**arguments, custom_layer=True)


# What each bad --generator value breaks.
NOT_CALLABLE = 3


def returns_a_layer(**arguments):
    return keras.layers.Dense(3)


def wrong_shape_generator(latent_dim, **arguments):
    return keras.Sequential([keras.Input(shape=(latent_dim,)), keras.layers.Dense(5)])


def no_keyword_arguments():
    return None


def raises_inside(latent_dim, **arguments):
    raise ValueError(f"no network for latent_dim={latent_dim}")


def half_precision_generator(latent_dim, shape, **arguments):
    noise = keras.Input(shape=(latent_dim,))
    flat = keras.layers.Dense(shape[0] * shape[1] * shape[2], dtype="float16")(noise)
    return keras.Model(noise, keras.layers.Reshape(shape, dtype="float16")(flat))
