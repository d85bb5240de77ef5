import numpy as np
import pytest
import tensorflow as tf

from gan import augment, networks, regularizers

POLICY = "color,translation,cutout"


def _images(batch=3, size=8, channels=3, seed=(1, 2), dtype=tf.float32):
    shape = (batch, size, size, channels)
    images = tf.random.stateless_uniform(shape, seed=seed, minval=-1, maxval=1)
    return tf.cast(images, dtype)


def _draws(batch, count, seed=(3, 4)):
    return tf.random.stateless_uniform((batch, count), seed=seed)


def _ramp(batch=2, size=8):
    """Image b has pixel (i, j) = 100 b + 10 i + j + 1, never zero, so moves are traceable."""
    b, i, j = np.meshgrid(np.arange(batch), np.arange(size), np.arange(size), indexing="ij")
    return tf.constant((100 * b + 10 * i + j + 1)[..., None], dtype=tf.float32)


def test_translate_moves_a_known_pixel_and_fills_zeros():
    images = _ramp()
    got = augment.translate(images, tf.constant([2, -1]), tf.constant([1, 3])).numpy()[..., 0]
    source = images.numpy()[..., 0]
    # Example 0: down 2, right 1. Example 1: up 1, right 3.
    assert got[0, 2, 1] == source[0, 0, 0] and got[0, 7, 7] == source[0, 5, 6]
    assert got[1, 0, 3] == source[1, 1, 0] and got[1, 6, 7] == source[1, 7, 4]
    np.testing.assert_array_equal(got[0, 2:, 1:], source[0, :-2, :-1])
    np.testing.assert_array_equal(got[1, :-1, 3:], source[1, 1:, :-3])
    assert np.count_nonzero(got[0] == 0) == 8 * 8 - 6 * 7
    assert np.count_nonzero(got[1] == 0) == 8 * 8 - 7 * 5


def test_translate_beyond_the_image_leaves_zeros_and_zero_shift_is_identity():
    images = _ramp()
    np.testing.assert_array_equal(
        augment.translate(images, tf.constant([9, 0]), tf.constant([0, -20])).numpy(), 0.0
    )
    same = augment.translate(images, tf.constant([0, 0]), tf.constant([0, 0]))
    np.testing.assert_array_equal(same.numpy(), images.numpy())


def test_translation_maps_draws_to_shifts():
    # 32 px, ratio 1/8: shifts in [-4, 4], 9 values; draw 0 -> -4, 0.5 -> 0, 0.99 -> +4.
    images = _ramp(batch=3, size=32)
    draws = tf.constant([[0.5, 0.5], [0.0, 0.99], [0.99, 0.0]])
    got = augment.translation(images, draws).numpy()
    expected = augment.translate(images, tf.constant([0, -4, 4]), tf.constant([0, 4, -4]))
    np.testing.assert_array_equal(got, expected.numpy())
    np.testing.assert_array_equal(got[0], images.numpy()[0])


def test_cut_out_zeroes_the_rectangle_clipped_to_the_image():
    ones = tf.ones((3, 8, 8, 2))
    got = augment.cut_out(ones, tf.constant([2, -2, 6]), tf.constant([1, 5, -1]), height=4, width=3)
    got = got.numpy()
    assert np.all(got[0, 2:6, 1:4] == 0.0)
    zeros = np.count_nonzero(got == 0.0, axis=(1, 2, 3))
    # Rows x columns inside the image: 4 x 3, 2 x 3 (rows 0-1, columns 5-7), 2 x 2.
    np.testing.assert_array_equal(zeros, [4 * 3 * 2, 2 * 3 * 2, 2 * 2 * 2])


def test_cutout_zeroes_a_quarter_for_a_central_draw():
    # 32 px, ratio 1/2: a 16 x 16 square; a draw of 0.5 centres it (start 8): 1/4 of the image.
    got = augment.cutout(tf.ones((2, 32, 32, 3)), tf.constant([[0.5, 0.5], [0.5, 0.5]])).numpy()
    np.testing.assert_array_equal(np.mean(got == 0.0, axis=(1, 2, 3)), [0.25, 0.25])
    assert np.all(got[:, 8:24, 8:24] == 0.0)


def test_cutout_at_the_border_keeps_at_least_a_quarter_of_the_square():
    got = augment.cutout(tf.ones((2, 32, 32, 1)), tf.constant([[0.0, 0.0], [0.999, 0.999]]))
    zeros = np.count_nonzero(got.numpy() == 0.0, axis=(1, 2, 3))
    np.testing.assert_array_equal(zeros, [8 * 8, 8 * 8])
    assert np.all(got.numpy()[0, :8, :8] == 0.0) and np.all(got.numpy()[1, 24:, 24:] == 0.0)


def test_random_cutout_area_is_between_a_quarter_and_the_whole_square():
    got = augment.cutout(tf.ones((64, 28, 28, 1)), _draws(64, 2)).numpy()
    zeros = np.count_nonzero(got == 0.0, axis=(1, 2, 3))
    assert np.all((zeros >= 7 * 7) & (zeros <= 14 * 14))
    assert np.any(zeros == 14 * 14) and np.any(zeros < 14 * 14)


def test_color_helpers_in_closed_form():
    x = tf.constant([[[[-1.0, 0.0, 0.5]]], [[[0.2, 0.2, 0.8]]]])  # (2, 1, 1, 3)
    np.testing.assert_allclose(
        augment.adjust_brightness(x, tf.constant([0.5, -0.25])).numpy(),
        [[[[-0.5, 0.5, 1.0]]], [[[-0.05, -0.05, 0.55]]]], rtol=1e-6)
    # Channel means -1/6 and 0.4; factors 0 and 2.
    np.testing.assert_allclose(
        augment.adjust_saturation(x, tf.constant([0.0, 2.0])).numpy(),
        [[[[-1 / 6] * 3]], [[[0.0, 0.0, 1.2]]]], rtol=1e-6, atol=1e-7)
    pixels = tf.constant([[[[0.0], [1.0]], [[-1.0], [0.4]]]])  # (1, 2, 2, 1), mean 0.1
    np.testing.assert_allclose(
        augment.adjust_contrast(pixels, tf.constant([1.5])).numpy()[0, ..., 0],
        [[-0.05, 1.45], [-1.55, 0.55]], rtol=1e-6)


def test_saturation_is_exactly_identity_for_grayscale():
    images = _images(channels=1)
    got = augment.adjust_saturation(images, tf.constant([0.0, 2.0, 0.37]))
    np.testing.assert_array_equal(got.numpy(), images.numpy())


def test_color_with_neutral_draws_is_identity():
    images = _images()
    got = augment.color(images, tf.fill((3, 3), 0.5))
    np.testing.assert_allclose(got.numpy(), images.numpy(), atol=1e-6)


def test_color_draws_map_to_paper_ranges():
    images = _images()
    draws = tf.constant([[0.0, 1.0, 0.0], [0.75, 0.25, 0.9], [0.5, 0.5, 1.0]])
    expected = augment.adjust_contrast(
        augment.adjust_saturation(
            augment.adjust_brightness(images, tf.constant([-0.5, 0.25, 0.0])),
            tf.constant([2.0, 0.5, 1.0])),
        tf.constant([0.5, 1.4, 1.5]))
    np.testing.assert_allclose(augment.color(images, draws).numpy(), expected.numpy(), rtol=1e-6)


@pytest.mark.parametrize("dtype", [tf.float32, tf.bfloat16])
def test_diff_augment_preserves_shape_and_dtype_and_is_a_function_of_the_draws(dtype):
    images = _images(batch=4, size=16, dtype=dtype)
    draws = _draws(4, augment.num_draws(POLICY))
    got = augment.diff_augment(images, POLICY, draws)
    assert got.shape == images.shape and got.dtype == dtype
    np.testing.assert_array_equal(augment.diff_augment(images, POLICY, draws).numpy(), got.numpy())
    other = augment.diff_augment(images, POLICY, _draws(4, 7, seed=(5, 6))).numpy()
    assert np.all(np.any(other != got.numpy(), axis=(1, 2, 3)))


def test_diff_augment_applies_ops_in_order_with_their_own_columns():
    images = _images(batch=2, size=16)
    draws = _draws(2, 4)
    got = augment.diff_augment(images, "translation, cutout", draws)
    expected = augment.cutout(augment.translation(images, draws[:, :2]), draws[:, 2:])
    np.testing.assert_array_equal(got.numpy(), expected.numpy())
    empty = augment.diff_augment(images, "", tf.zeros((2, 0)))
    np.testing.assert_array_equal(empty.numpy(), images.numpy())


def test_gradient_flows_through_every_op_inside_tf_function():
    images = _images(batch=2, size=16)
    draws = _draws(2, 7)

    @tf.function
    def grad(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            total = tf.reduce_sum(augment.diff_augment(x, POLICY, draws))
        return tape.gradient(total, x)

    got = grad(images)
    with tf.GradientTape() as tape:
        tape.watch(images)
        total = tf.reduce_sum(augment.diff_augment(images, POLICY, draws))
    eager = tape.gradient(total, images)
    assert got.shape == images.shape and np.any(got.numpy() != 0.0)
    np.testing.assert_allclose(got.numpy(), eager.numpy(), rtol=1e-5, atol=1e-6)


def test_translation_gradient_counts_where_each_pixel_lands():
    # d sum(translate(x)) / dx is 1 where a pixel stays in the image and 0 where it leaves.
    x = tf.ones((1, 4, 4, 1))
    with tf.GradientTape() as tape:
        tape.watch(x)
        total = tf.reduce_sum(augment.translate(x, tf.constant([1]), tf.constant([-2])))
    grad = tape.gradient(total, x).numpy()[0, ..., 0]
    expected = np.zeros((4, 4))
    expected[:3, 2:] = 1.0
    np.testing.assert_array_equal(grad, expected)


def test_num_draws():
    assert augment.num_draws(POLICY) == 7
    assert augment.num_draws("cutout") == 2 and augment.num_draws("") == 0


def test_unknown_policy_names_the_flag_the_op_and_the_valid_ops():
    with pytest.raises(ValueError) as error:
        augment.parse_policy("color,flip")
    message = str(error.value)
    assert "--diffaugment" in message and "'flip'" in message
    assert "color, translation, cutout" in message


def test_wrong_draw_shape_is_rejected():
    with pytest.raises(ValueError, match=r"\(batch, 7\)"):
        augment.diff_augment(_images(), POLICY, _draws(3, 6))
    with pytest.raises(ValueError, match=r"\(batch, 2\)"):
        augment.translation(_images(), _draws(3, 3))


@pytest.mark.parametrize("ratio", [-0.1, 1.5])
def test_bad_ratio_is_rejected(ratio):
    with pytest.raises(ValueError, match=repr(ratio)):
        augment.cutout(_images(), _draws(3, 2), ratio=ratio)


def test_r1_through_augmentation_reaches_the_critic_variables():
    # StyleGAN2-ADA style: R1 w.r.t. the un-augmented reals of D(augment(x)) needs second-order
    # gradients through every op.
    critic = networks.wgan_critic(resolution=28, channels=1, width=4)
    images = _images(batch=2, size=28, channels=1)
    draws = _draws(2, augment.num_draws(POLICY))
    with tf.GradientTape() as tape:
        penalty = regularizers.r1_penalty(
            lambda x: critic(augment.diff_augment(x, POLICY, draws), training=True), images)
        total = tf.reduce_sum(penalty)
    grads = tape.gradient(total, critic.trainable_variables)
    kernels = [g.numpy() for v, g in zip(critic.trainable_variables, grads) if "kernel" in v.path]
    assert penalty.shape == (2,) and len(kernels) == 3
    assert all(np.all(np.isfinite(g)) and np.any(g != 0.0) for g in kernels)
