import keras
import numpy as np
import pytest
import tensorflow as tf

from gan import cyclegan

WIDTH = 4


def _images(resolution, channels, batch=2, seed=0):
    return tf.random.stateless_uniform((batch, resolution, resolution, channels), seed=(seed, 1),
                                       minval=-1.0, maxval=1.0)


@pytest.mark.parametrize("resolution,channels", [(28, 1), (32, 3), (64, 3), (128, 3), (256, 1)])
def test_generator_keeps_the_image_shape_in_tanh_range(resolution, channels):
    generator = cyclegan.resnet_generator(resolution=resolution, channels=channels, width=WIDTH)

    images = generator(_images(resolution, channels) * 50.0, training=True)

    assert images.shape == (2, resolution, resolution, channels)
    assert images.dtype == tf.float32
    assert np.abs(images.numpy()).max() <= 1.0
    blocks = [layer for layer in generator.layers if layer.name.endswith("_add")]
    assert len(blocks) == cyclegan.DEFAULT_RESIDUAL_BLOCKS[resolution]


def test_generator_bottleneck_is_a_quarter_of_the_side_with_four_times_the_width():
    generator = cyclegan.resnet_generator(resolution=28, channels=1, width=WIDTH, residual_blocks=2)

    assert generator.get_layer("down1").output.shape == (None, 7, 7, 4 * WIDTH)
    assert generator.get_layer("up0").output.shape == (None, 14, 14, 2 * WIDTH)
    assert len([layer for layer in generator.layers if layer.name.endswith("_add")]) == 2


def test_generator_rejects_sides_not_divisible_by_four():
    with pytest.raises(ValueError, match="divisible by 4"):
        cyclegan.resnet_generator(resolution=30, channels=1)


@pytest.mark.parametrize("resolution,side,downsamplings",
                         [(28, 7, 2), (32, 8, 2), (64, 8, 3), (128, 8, 4), (256, 8, 5)])
def test_patch_discriminator_returns_a_logit_map(resolution, side, downsamplings):
    discriminator = cyclegan.patch_discriminator(resolution=resolution, channels=3, width=WIDTH)

    logits = discriminator(_images(resolution, 3))

    assert cyclegan.patch_downsamplings(resolution) == downsamplings
    assert logits.shape == (2, side, side, 1)
    assert logits.dtype == tf.float32
    widths = [layer.filters for layer in discriminator.layers if isinstance(layer, keras.layers.Conv2D)]
    # Doubling up to 8 x WIDTH (the paper's C512 at width 64), then constant.
    assert widths == [WIDTH * min(2 ** i, 8) for i in range(downsamplings + 1)] + [1]


def test_outputs_stay_float32_under_mixed_precision():
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        generator = cyclegan.resnet_generator(resolution=28, channels=1, width=WIDTH)
        discriminator = cyclegan.patch_discriminator(resolution=28, channels=1, width=WIDTH)
    finally:
        keras.mixed_precision.set_global_policy("float32")
    assert generator(_images(28, 1)).dtype == tf.float32
    assert discriminator(_images(28, 1)).dtype == tf.float32


def test_instance_normalization_equals_group_normalization_with_one_group_per_channel():
    x = _images(6, 5, batch=3) * 3.0 + 1.0
    ours = cyclegan.InstanceNormalization()
    keras_layer = keras.layers.GroupNormalization(groups=-1, epsilon=1e-5)
    ours.build(x.shape)
    keras_layer.build(x.shape)
    gamma, beta = np.linspace(0.5, 2.0, 5), np.linspace(-1.0, 1.0, 5)
    ours.set_weights([gamma, beta])
    keras_layer.set_weights([gamma, beta])

    np.testing.assert_allclose(ours(x).numpy(), keras_layer(x).numpy(), atol=1e-5)
    normalized = cyclegan.InstanceNormalization()(x).numpy()
    np.testing.assert_allclose(normalized.mean(axis=(1, 2)), 0.0, atol=1e-5)
    np.testing.assert_allclose(normalized.std(axis=(1, 2)), 1.0, atol=1e-3)


def test_reflection_padding_mirrors_without_repeating_the_edge():
    row = tf.reshape(tf.constant([1.0, 2.0, 3.0]), (1, 1, 3, 1))
    padded = cyclegan.ReflectionPadding2D(2)(tf.tile(row, (1, 3, 1, 1)))

    assert padded.shape == (1, 7, 7, 1)
    np.testing.assert_array_equal(padded[0, 3, :, 0].numpy(), [3, 2, 1, 2, 3, 2, 1])


def test_reconstruction_loss_is_the_per_example_mean_absolute_difference():
    target = tf.constant([[[[1.0], [0.0]], [[-1.0], [0.5]]], [[[0.0], [0.0]], [[0.0], [0.0]]]])
    output = tf.constant([[[[0.0], [0.0]], [[-1.0], [-0.5]]], [[[1.0], [-1.0]], [[0.5], [0.5]]]])

    loss = cyclegan.reconstruction_loss(target, output)

    assert loss.shape == (2,) and loss.dtype == tf.float32
    np.testing.assert_allclose(loss.numpy(), [(1 + 0 + 0 + 1) / 4, (1 + 1 + 0.5 + 0.5) / 4])
    np.testing.assert_array_equal(cyclegan.reconstruction_loss(target, target).numpy(), [0.0, 0.0])


def _numbered(values):
    return tf.reshape(tf.constant(values, tf.float32), (-1, 1, 1, 1)) * tf.ones((1, 2, 2, 1))


def test_history_fills_then_swaps_with_probability_one_half():
    history = cyclegan.ImageHistory(image_shape=(2, 2, 1), size=3)
    # Images 0-2 fill the history; 3 swaps with slot floor(0.5 * 3) = 1; 4 passes through.
    draws = tf.constant([[0.9, 0.0], [0.9, 0.0], [0.9, 0.0], [0.1, 0.5], [0.9, 0.1]])

    shown = history.exchange(_numbered([0, 1, 2, 3, 4]), draws)

    np.testing.assert_array_equal(shown[:, 0, 0, 0].numpy(), [0, 1, 2, 1, 4])
    np.testing.assert_array_equal(history.images[:, 0, 0, 0].numpy(), [0, 3, 2])
    assert int(history.count.numpy()) == 3
    # A swap returns the image stored by an earlier one in the same batch (slot 2 twice).
    shown = history.exchange(_numbered([5, 6]), tf.constant([[0.0, 0.99], [0.0, 0.7]]))
    np.testing.assert_array_equal(shown[:, 0, 0, 0].numpy(), [2, 5])
    np.testing.assert_array_equal(history.images[:, 0, 0, 0].numpy(), [0, 3, 6])


def test_history_state_round_trips_through_a_checkpoint(tmp_path):
    history = cyclegan.ImageHistory(image_shape=(2, 2, 1), size=2)
    history.exchange(_numbered([7]), tf.zeros((1, 2)))
    path = tf.train.Checkpoint(history=history).write(str(tmp_path / "ckpt"))

    restored = cyclegan.ImageHistory(image_shape=(2, 2, 1), size=2)
    tf.train.Checkpoint(history=restored).read(path).assert_consumed()

    assert int(restored.count.numpy()) == 1
    np.testing.assert_array_equal(restored.images[:, 0, 0, 0].numpy(), [7, 0])


def test_history_rejects_draws_of_the_wrong_shape():
    history = cyclegan.ImageHistory(image_shape=(2, 2, 1), size=2)
    with pytest.raises(ValueError, match=r"draws of shape \(3, 2\)"):
        history.exchange(_numbered([1, 2, 3]), tf.zeros((3, 1)))
