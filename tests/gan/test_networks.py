import keras
import numpy as np
import pytest
import tensorflow as tf

from gan import networks
from trainers.engine.distribution import make_strategy
from trainers.setups import adversarial_flags

SHAPES = [(28, 1), (32, 1), (32, 3), (64, 3)]
LATENT_DIM = 8
WIDTH = 8
BATCH = 2


@pytest.fixture
def mixed_bfloat16():
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    try:
        yield
    finally:
        keras.mixed_precision.set_global_policy("float32")


def _latents(batch=BATCH, latent_dim=LATENT_DIM):
    return tf.random.stateless_normal((batch, latent_dim), seed=(0, 1))


def _conv_channels(model, layer_type):
    return [layer.filters for layer in model.layers if type(layer) is layer_type]


@pytest.mark.parametrize("resolution,channels", SHAPES)
def test_generator_output_shape_dtype_and_range(resolution, channels):
    generator = networks.dcgan_generator(
        resolution=resolution, channels=channels, latent_dim=LATENT_DIM, width=WIDTH
    )
    images = generator(_latents(), training=True)
    assert images.shape == (BATCH, resolution, resolution, channels)
    assert images.dtype == tf.float32
    assert np.all(np.abs(images.numpy()) <= 1.0)
    assert generator.name == "generator"


@pytest.mark.parametrize("resolution,channels", SHAPES)
def test_discriminator_logits_shape_and_dtype(resolution, channels):
    discriminator = networks.dcgan_discriminator(
        resolution=resolution, channels=channels, width=WIDTH
    )
    images = tf.zeros((BATCH, resolution, resolution, channels))
    logits = discriminator(images)
    assert logits.shape == (BATCH, 1) and logits.dtype == tf.float32


@pytest.mark.parametrize(
    "resolution,generator_convs,discriminator_convs",
    [
        (28, [WIDTH, 1], [WIDTH, 2 * WIDTH]),
        (32, [2 * WIDTH, WIDTH, 1], [WIDTH, 2 * WIDTH, 4 * WIDTH]),
        (64, [4 * WIDTH, 2 * WIDTH, WIDTH, 1], [WIDTH, 2 * WIDTH, 4 * WIDTH, 8 * WIDTH]),
        # The multiplier stops at 8 (MAX_WIDTH_MULTIPLIER): the seeds of 128 and 256 px are 8w.
        (128, [8 * WIDTH, 4 * WIDTH, 2 * WIDTH, WIDTH, 1],
         [WIDTH, 2 * WIDTH, 4 * WIDTH, 8 * WIDTH, 8 * WIDTH]),
        (256, [8 * WIDTH, 8 * WIDTH, 4 * WIDTH, 2 * WIDTH, WIDTH, 1],
         [WIDTH, 2 * WIDTH, 4 * WIDTH, 8 * WIDTH, 8 * WIDTH, 8 * WIDTH]),
    ],
)
def test_channel_progression(resolution, generator_convs, discriminator_convs):
    generator = networks.dcgan_generator(
        resolution=resolution, channels=1, latent_dim=LATENT_DIM, width=WIDTH
    )
    discriminator = networks.dcgan_discriminator(resolution=resolution, channels=1, width=WIDTH)
    assert _conv_channels(generator, keras.layers.Conv2DTranspose) == generator_convs
    assert _conv_channels(discriminator, keras.layers.Conv2D) == discriminator_convs
    seed_channels = {28: 2, 32: 4, 64: 8, 128: 8, 256: 8}[resolution] * WIDTH
    seed_side = 7 if resolution == 28 else 4
    assert generator.get_layer("seed").units == seed_side * seed_side * seed_channels


def test_generator_parameter_count_28px_width64():
    latent_dim = 100
    generator = networks.dcgan_generator(resolution=28, channels=1, latent_dim=latent_dim)
    seed = latent_dim * 7 * 7 * 128  # Dense, no bias
    seed_bn = 4 * 128  # gamma, beta, moving mean, moving variance
    up0 = 4 * 4 * 128 * 64  # Conv2DTranspose 128 -> 64, kernel 4, no bias
    up0_bn = 4 * 64
    to_image = 4 * 4 * 64 * 1 + 1  # Conv2DTranspose 64 -> 1 with bias
    assert generator.count_params() == seed + seed_bn + up0 + up0_bn + to_image == 760065
    trainable = sum(int(np.prod(v.shape)) for v in generator.trainable_weights)
    assert trainable == 760065 - 2 * 128 - 2 * 64


def test_discriminator_parameter_count_28px_width64():
    discriminator = networks.dcgan_discriminator(resolution=28, channels=1)
    down0 = 4 * 4 * 1 * 64 + 64
    down1 = 4 * 4 * 64 * 128 + 128
    logits = 7 * 7 * 128 + 1
    assert discriminator.count_params() == down0 + down1 + logits


@pytest.mark.parametrize(
    "normalization,layer_type",
    [("batch", keras.layers.BatchNormalization), ("layer", keras.layers.LayerNormalization)],
)
def test_normalization_follows_every_conv_but_the_first(normalization, layer_type):
    discriminator = networks.dcgan_discriminator(
        resolution=32, channels=3, width=WIDTH, normalization=normalization
    )
    norms = [layer for layer in discriminator.layers if isinstance(layer, layer_type)]
    assert [layer.name for layer in norms] == ["down1_norm", "down2_norm"]
    convs = [layer for layer in discriminator.layers if isinstance(layer, keras.layers.Conv2D)]
    assert [conv.use_bias for conv in convs] == [True, False, False]
    logits = discriminator(tf.zeros((BATCH, 32, 32, 3)), training=True)
    assert logits.shape == (BATCH, 1)


def test_layer_norm_critic_scores_examples_independently():
    # With layer norm an example's logit must not depend on the rest of the batch.
    critic = networks.dcgan_discriminator(
        resolution=28, channels=1, width=WIDTH, normalization="layer"
    )
    images = tf.random.stateless_uniform((3, 28, 28, 1), seed=(3, 4), minval=-1, maxval=1)
    together = critic(images, training=True).numpy()
    alone = critic(images[:1], training=True).numpy()
    np.testing.assert_allclose(alone, together[:1], rtol=1e-5, atol=1e-6)


def test_dropout_follows_each_leaky_relu():
    discriminator = networks.dcgan_discriminator(
        resolution=28, channels=1, width=WIDTH, dropout=0.3
    )
    names = [layer.name for layer in discriminator.layers]
    assert [n for n in names if "dropout" in n] == ["down0_dropout", "down1_dropout"]
    assert names.index("down0_dropout") == names.index("down0_lrelu") + 1
    assert all(layer.rate == 0.3 for layer in discriminator.layers if "dropout" in layer.name)
    no_dropout = networks.dcgan_discriminator(resolution=28, channels=1, width=WIDTH)
    assert not any("dropout" in layer.name for layer in no_dropout.layers)


def test_generator_extra_blocks_deepen_every_level_without_resampling():
    plain = networks.dcgan_generator(resolution=28, channels=1, latent_dim=LATENT_DIM, width=WIDTH)
    deeper = networks.dcgan_generator(resolution=28, channels=1, latent_dim=LATENT_DIM,
                                      width=WIDTH, extra_blocks=2)
    extra = [layer for layer in deeper.layers if isinstance(layer, keras.layers.Conv2D)
             and not isinstance(layer, keras.layers.Conv2DTranspose)]
    assert [layer.name for layer in extra] == ["seed_extra0", "seed_extra1", "up0_extra0", "up0_extra1"]
    # 3x3, stride 1, same channels in and out: the seed is 7x7x(2w), the hidden block 14x14x(w).
    assert [tuple(layer.output.shape[1:]) for layer in extra] == [
        (7, 7, 2 * WIDTH), (7, 7, 2 * WIDTH), (14, 14, WIDTH), (14, 14, WIDTH)]
    assert all(layer.kernel_size == (3, 3) and layer.strides == (1, 1) and not layer.use_bias
               for layer in extra)
    names = [layer.name for layer in deeper.layers]
    assert names.index("seed_extra0_bn") == names.index("seed_extra0") + 1
    assert names.index("up0_extra1_relu") == names.index("up0_extra1_bn") + 1
    # Each block adds its 3x3 kernel and its batch norm's gamma and beta, nothing else.
    added = 2 * (9 * (2 * WIDTH) ** 2 + 2 * 2 * WIDTH) + 2 * (9 * WIDTH**2 + 2 * WIDTH)
    assert (sum(v.numpy().size for v in deeper.trainable_variables)
            - sum(v.numpy().size for v in plain.trainable_variables)) == added
    images = deeper(tf.random.stateless_normal((BATCH, LATENT_DIM), seed=(1, 2)), training=True)
    assert images.shape == (BATCH, 28, 28, 1)
    assert float(tf.reduce_max(tf.abs(images))) <= 1.0


@pytest.mark.parametrize("upsample", ["nearest", "bilinear"])
@pytest.mark.parametrize("resolution,channels", SHAPES)
def test_resize_upsampling_replaces_every_transposed_convolution(upsample, resolution, channels):
    transposed = networks.dcgan_generator(resolution=resolution, channels=channels,
                                          latent_dim=LATENT_DIM, width=WIDTH)
    resized = networks.dcgan_generator(resolution=resolution, channels=channels,
                                       latent_dim=LATENT_DIM, width=WIDTH, upsample=upsample)
    assert not any(isinstance(layer, keras.layers.Conv2DTranspose) for layer in resized.layers)
    upsampling_names = [layer.name for layer in transposed.layers
                        if isinstance(layer, keras.layers.Conv2DTranspose)]
    for name in upsampling_names:
        resize, conv = resized.get_layer(f"{name}_resize"), resized.get_layer(name)
        assert resize.interpolation == upsample and tuple(resize.size) == (2, 2)
        assert conv.kernel_size == (3, 3) and conv.strides == (1, 1)
        assert conv.filters == transposed.get_layer(name).filters
        assert conv.use_bias == (name == "to_image")
        assert tuple(conv.output.shape[1:3]) == tuple(transposed.get_layer(name).output.shape[1:3])
    # Only the upsampling kernels change size, from 4x4 to 3x3.
    kernels = {name: transposed.get_layer(name).kernel.numpy().size for name in upsampling_names}
    assert (sum(v.numpy().size for v in transposed.trainable_variables)
            - sum(v.numpy().size for v in resized.trainable_variables)) == sum(
                size * 7 // 16 for size in kernels.values())
    images = resized(_latents(), training=True)
    assert images.shape == (BATCH, resolution, resolution, channels)
    assert float(tf.reduce_max(tf.abs(images))) <= 1.0


@pytest.mark.parametrize("upsample, blocks_are_constant", [("nearest", True), ("bilinear", False)])
def test_resize_layer_interpolates_as_named(upsample, blocks_are_constant):
    generator = networks.dcgan_generator(resolution=28, channels=1, latent_dim=LATENT_DIM,
                                         width=WIDTH, upsample=upsample)
    resized = keras.Model(generator.input, generator.get_layer("up0_resize").output)(
        _latents(), training=False).numpy()
    assert resized.shape == (BATCH, 14, 14, 2 * WIDTH)
    # Nearest neighbour copies each 7x7 pixel into a 2x2 block; bilinear blends neighbours.
    blocks = resized.reshape(BATCH, 7, 2, 7, 2, 2 * WIDTH)
    assert np.allclose(blocks, blocks[:, :, :1, :, :1]) == blocks_are_constant


def test_upsampling_choices_match_the_configuration():
    assert networks.UPSAMPLINGS == adversarial_flags.UPSAMPLINGS
    with pytest.raises(ValueError, match="Unknown upsample 'pixel_shuffle'"):
        networks.dcgan_generator(resolution=28, channels=1, latent_dim=LATENT_DIM,
                                 upsample="pixel_shuffle")


@pytest.mark.parametrize("normalization,spectral_norm", [("none", False), ("batch", False),
                                                         ("none", True)])
def test_discriminator_extra_blocks_follow_each_stride_2_convolution(normalization, spectral_norm):
    discriminator = networks.dcgan_discriminator(
        resolution=32, channels=3, width=WIDTH, normalization=normalization,
        spectral_norm=spectral_norm, dropout=0.2, extra_blocks=1)
    unwrapped = [layer.layer if isinstance(layer, keras.layers.SpectralNormalization) else layer
                 for layer in discriminator.layers]
    convs = {layer.name: layer for layer in unwrapped if isinstance(layer, keras.layers.Conv2D)}
    assert list(convs) == ["down0", "down0_extra0", "down1", "down1_extra0", "down2", "down2_extra0"]
    for index, channels in enumerate((WIDTH, 2 * WIDTH, 4 * WIDTH)):
        extra = convs[f"down{index}_extra0"]
        assert extra.kernel_size == (3, 3) and extra.strides == (1, 1) and extra.filters == channels
        # Normalized like DCGAN's later convolutions (bias-free), the first included.
        assert extra.use_bias == (normalization == "none")
    names = [layer.name for layer in discriminator.layers]
    assert [n for n in names if n.endswith("_dropout")] == [
        "down0_dropout", "down0_extra0_dropout", "down1_dropout", "down1_extra0_dropout",
        "down2_dropout", "down2_extra0_dropout"]
    if normalization == "batch":
        assert "down0_extra0_norm" in names and "down0_norm" not in names
    assert discriminator(tf.zeros((BATCH, 32, 32, 3)), training=True).shape == (BATCH, 1)


def test_wgan_critic_has_no_normalization():
    critic = networks.wgan_critic(resolution=32, channels=3, width=WIDTH)
    assert critic.name == "critic"
    assert not any(
        isinstance(layer, (keras.layers.BatchNormalization, keras.layers.LayerNormalization))
        for layer in critic.layers
    )
    assert critic(tf.zeros((BATCH, 32, 32, 3))).shape == (BATCH, 1)


@pytest.mark.usefixtures("mixed_bfloat16")
@pytest.mark.parametrize("resolution,channels", [(28, 1), (32, 3)])
def test_outputs_stay_float32_under_mixed_precision(resolution, channels):
    generator = networks.dcgan_generator(
        resolution=resolution, channels=channels, latent_dim=LATENT_DIM, width=WIDTH
    )
    discriminator = networks.dcgan_discriminator(
        resolution=resolution, channels=channels, width=WIDTH, normalization="layer"
    )
    assert generator.get_layer("up0").compute_dtype == "bfloat16"
    assert discriminator.get_layer("down0").compute_dtype == "bfloat16"
    images = generator(_latents(), training=True)
    assert images.dtype == tf.float32
    assert discriminator(images, training=True).dtype == tf.float32


@pytest.mark.usefixtures("mixed_bfloat16")
def test_mlp_outputs_stay_float32_under_mixed_precision():
    generator = networks.mlp_generator(latent_dim=LATENT_DIM, width=WIDTH, depth=2)
    discriminator = networks.mlp_discriminator(width=WIDTH, depth=2)
    assert generator.get_layer("hidden0").compute_dtype == "bfloat16"
    samples = generator(_latents())
    assert samples.dtype == tf.float32
    assert discriminator(samples).dtype == tf.float32


def test_mlp_shapes_and_parameter_counts():
    generator = networks.mlp_generator(latent_dim=LATENT_DIM, output_dim=3, width=WIDTH, depth=2)
    discriminator = networks.mlp_discriminator(input_dim=3, width=WIDTH, depth=2)
    samples = generator(_latents(batch=4))
    assert samples.shape == (4, 3) and samples.dtype == tf.float32
    logits = discriminator(samples)
    assert logits.shape == (4, 1) and logits.dtype == tf.float32
    assert generator.count_params() == (8 * 8 + 8) + (8 * 8 + 8) + (8 * 3 + 3)
    assert discriminator.count_params() == (3 * 8 + 8) + (8 * 8 + 8) + (8 + 1)
    hidden = [layer for layer in discriminator.layers if isinstance(layer, keras.layers.Dense)]
    assert len(hidden) == 3


def test_mlp_defaults_are_2d():
    generator = networks.mlp_generator(latent_dim=4)
    discriminator = networks.mlp_discriminator()
    assert generator.output_shape == (None, 2)
    assert discriminator.input_shape == (None, 2)
    assert len([layer for layer in generator.layers if isinstance(layer, keras.layers.ReLU)]) == 3


@pytest.mark.parametrize("builder", ["generator", "discriminator", "critic"])
@pytest.mark.parametrize("resolution", [16, 48, 512])
def test_unsupported_resolution_names_the_flag(builder, resolution):
    build = {
        "generator": lambda: networks.dcgan_generator(
            resolution=resolution, channels=1, latent_dim=LATENT_DIM
        ),
        "discriminator": lambda: networks.dcgan_discriminator(resolution=resolution, channels=1),
        "critic": lambda: networks.wgan_critic(resolution=resolution, channels=1),
    }[builder]
    with pytest.raises(ValueError) as error:
        build()
    message = str(error.value)
    assert "--resolution" in message and str(resolution) in message
    assert "(28, 32, 64, 128, 256)" in message


@pytest.mark.parametrize(
    "kwargs,expected",
    [
        ({"channels": 0}, "channels must be >= 1, got 0"),
        ({"width": 0}, "width must be >= 1, got 0"),
        ({"latent_dim": -3}, "latent_dim must be >= 1, got -3"),
        ({"extra_blocks": -1}, "extra_blocks must be >= 0, got -1"),
    ],
)
def test_generator_rejects_bad_sizes(kwargs, expected):
    arguments = {"resolution": 28, "channels": 1, "latent_dim": LATENT_DIM, **kwargs}
    with pytest.raises(ValueError, match=expected):
        networks.dcgan_generator(**arguments)


@pytest.mark.parametrize(
    "kwargs,expected",
    [
        ({"channels": 0}, "got 0"),
        ({"width": -1}, "got -1"),
        ({"normalization": "spectral"}, "'spectral'"),
        ({"dropout": 1.0}, "got 1.0"),
        ({"dropout": -0.1}, "got -0.1"),
        ({"extra_blocks": -2}, "extra_blocks must be >= 0, got -2"),
    ],
)
def test_discriminator_rejects_bad_arguments(kwargs, expected):
    arguments = {"resolution": 28, "channels": 1, **kwargs}
    with pytest.raises(ValueError, match=expected):
        networks.dcgan_discriminator(**arguments)


@pytest.mark.parametrize(
    "build,expected",
    [
        (lambda: networks.mlp_generator(latent_dim=0), "latent_dim must be >= 1, got 0"),
        (lambda: networks.mlp_generator(latent_dim=2, depth=0), "depth must be >= 1, got 0"),
        (lambda: networks.mlp_generator(latent_dim=2, output_dim=0), "output_dim"),
        (lambda: networks.mlp_discriminator(width=0), "width must be >= 1, got 0"),
        (lambda: networks.mlp_discriminator(input_dim=0), "input_dim must be >= 1, got 0"),
    ],
)
def test_mlp_rejects_bad_sizes(build, expected):
    with pytest.raises(ValueError, match=expected):
        build()


def _spectral_layers(model):
    return [layer for layer in model.layers if isinstance(layer, keras.layers.SpectralNormalization)]


def _largest_singular_value(kernel):
    matrix = kernel.numpy().reshape(-1, kernel.shape[-1])
    return np.linalg.svd(matrix, compute_uv=False)[0]


def test_spectral_norm_wraps_every_conv_and_the_logits():
    discriminator = networks.dcgan_discriminator(
        resolution=32, channels=3, width=WIDTH, spectral_norm=True
    )
    wrapped = _spectral_layers(discriminator)
    assert [layer.name for layer in wrapped] == ["down0_sn", "down1_sn", "down2_sn", "logits_sn"]
    assert [type(layer.layer) for layer in wrapped] == [keras.layers.Conv2D] * 3 + [
        keras.layers.Dense
    ]
    assert all(layer.power_iterations == 1 for layer in wrapped)
    logits = discriminator(tf.zeros((BATCH, 32, 32, 3)), training=True)
    assert logits.shape == (BATCH, 1) and logits.dtype == tf.float32


def test_spectral_norm_variables_28px_width64():
    discriminator = networks.dcgan_discriminator(resolution=28, channels=1, spectral_norm=True)
    plain = (4 * 4 * 1 * 64 + 64) + (4 * 4 * 64 * 128 + 128) + (7 * 7 * 128 + 1)
    vector_u = 64 + 128 + 1  # one (1, out) power-iteration vector per wrapped layer
    assert discriminator.count_params() == plain + vector_u
    trainable = sum(int(np.prod(v.shape)) for v in discriminator.trainable_variables)
    assert trainable == plain
    assert sorted(v.path for v in discriminator.non_trainable_variables) == [
        "down0_sn/vector_u", "down1_sn/vector_u", "logits_sn/vector_u"
    ]


def test_spectral_norm_power_iteration_converges_to_unit_spectral_norm():
    # Power iteration converges at a rate set by the kernels' singular-value gaps: seed them.
    keras.utils.set_random_seed(0)
    discriminator = networks.dcgan_discriminator(
        resolution=28, channels=1, width=WIDTH, spectral_norm=True
    )
    images = tf.random.stateless_uniform((BATCH, 28, 28, 1), seed=(1, 2), minval=-1, maxval=1)
    call = tf.function(lambda x: discriminator(x, training=True))
    for _ in range(60):
        call(images)
    wrapped = _spectral_layers(discriminator)
    # The layers compute with W / sigma, whose largest singular value is 1.
    sigmas = [_largest_singular_value(layer.normalized_weights(training=False)[1])
              for layer in wrapped]
    np.testing.assert_allclose(sigmas, [1.0, 1.0, 1.0], atol=1e-3)


def test_spectral_norm_changes_state_only_in_training_mode():
    discriminator = networks.dcgan_discriminator(
        resolution=28, channels=1, width=WIDTH, spectral_norm=True
    )
    images = tf.ones((BATCH, 28, 28, 1))
    before = [v.numpy() for v in discriminator.variables]
    discriminator(images, training=False)
    for old, variable in zip(before, discriminator.variables):
        np.testing.assert_array_equal(variable.numpy(), old)
    discriminator(images, training=True)
    changed = {v.path for old, v in zip(before, discriminator.variables)
               if not np.array_equal(v.numpy(), old)}
    # Only the power-iteration vectors: the kernels are free, not normalized in place.
    assert changed == {"down0_sn/vector_u", "down1_sn/vector_u", "logits_sn/vector_u"}


def _spectral_dense(power_iterations=1):
    inputs = keras.Input((3,))
    layer = networks.spectral(keras.layers.Dense(2, name="dense"), True)
    layer.power_iterations = power_iterations
    return keras.Model(inputs, layer(inputs)), layer


def test_spectral_norm_gradient_flows_through_sigma():
    # As in Miyato et al.: d sum(x W / sigma(W) + b) / dW, sigma the largest singular value
    # (converged power iteration), against the same through an exact SVD.
    model, layer = _spectral_dense(power_iterations=50)
    x = tf.constant([[1.0, 2.0, 3.0], [0.5, -1.0, 2.0]])
    with tf.GradientTape() as tape:
        total = tf.reduce_sum(model(x, training=True))
    grad = tape.gradient(total, layer.layer.kernel)
    kernel = tf.Variable(layer.layer.kernel.numpy())
    with tf.GradientTape() as tape:
        sigma = tf.linalg.svd(kernel, compute_uv=False)[0]
        expected = tf.reduce_sum(x @ (kernel / sigma))
    np.testing.assert_allclose(grad.numpy(), tape.gradient(expected, kernel).numpy(), atol=1e-5)
    # Scaling W changes nothing, so the gradient is orthogonal to W ...
    assert abs(float(tf.reduce_sum(grad * kernel))) < 1e-5 * float(tf.norm(grad) * tf.norm(kernel))


def test_spectral_norm_free_kernel_lengthens_under_gradient_descent():
    # ... and every gradient-descent step lengthens the free kernel (Pythagoras): later steps
    # turn it by less, where an in-place normalization would keep its length at sigma 1.
    model, layer = _spectral_dense()
    x = tf.random.stateless_normal((16, 3), seed=(3, 4))
    target = tf.random.stateless_normal((16, 2), seed=(5, 6))
    optimizer = keras.optimizers.SGD(0.5)
    norms = [float(tf.norm(layer.layer.kernel))]
    for _ in range(5):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((model(x, training=True) - target) ** 2)
        optimizer.apply([tape.gradient(loss, layer.layer.kernel)], [layer.layer.kernel])
        norms.append(float(tf.norm(layer.layer.kernel)))
    assert all(later > earlier for earlier, later in zip(norms, norms[1:])), norms


def test_spectral_norm_inference_divides_by_the_stored_estimate():
    model, layer = _spectral_dense(power_iterations=50)
    x = tf.constant([[1.0, 2.0, 3.0]])
    model(x, training=True)
    kernel, bias = layer.layer.kernel.numpy(), layer.layer.bias.numpy()
    before = layer.vector_u.numpy()
    sigma = np.linalg.svd(kernel, compute_uv=False)[0]
    np.testing.assert_allclose(model(x, training=False).numpy(), x.numpy() @ (kernel / sigma) + bias,
                               rtol=1e-5)
    np.testing.assert_array_equal(layer.vector_u.numpy(), before)


def test_spectral_norm_state_is_checkpointed(tmp_path):
    def build():
        return networks.dcgan_discriminator(
            resolution=28, channels=1, width=WIDTH, spectral_norm=True
        )

    discriminator = build()
    for _ in range(3):
        discriminator(tf.ones((BATCH, 28, 28, 1)), training=True)
    path = tf.train.Checkpoint(model=discriminator).write(str(tmp_path / "ckpt"))
    restored = build()
    tf.train.Checkpoint(model=restored).read(path).assert_consumed()
    for saved, loaded in zip(discriminator.variables, restored.variables):
        assert saved.path == loaded.path
        np.testing.assert_array_equal(loaded.numpy(), saved.numpy())


def test_spectral_norm_replicas_stay_identical_under_mirrored_strategy():
    strategy = make_strategy("mirrored", cpu_replicas=2)  # one instance per process: shared collective keys
    with strategy.scope():
        discriminator = networks.dcgan_discriminator(
            resolution=28, channels=1, width=WIDTH, spectral_norm=True
        )
    images = strategy.experimental_distribute_values_from_function(
        lambda context: tf.fill((1, 28, 28, 1), float(context.replica_id_in_sync_group))
    )
    call = tf.function(lambda x: strategy.run(lambda y: discriminator(y, training=True), args=(x,)))
    call(images)
    call(images)
    for variable in discriminator.non_trainable_variables + discriminator.trainable_variables:
        first, second = (tf.convert_to_tensor(v).numpy() for v in variable.value.values)
        np.testing.assert_array_equal(first, second)


@pytest.mark.usefixtures("mixed_bfloat16")
def test_spectral_norm_keeps_float32_master_kernels_under_mixed_precision():
    discriminator = networks.dcgan_discriminator(
        resolution=28, channels=1, width=WIDTH, spectral_norm=True
    )
    assert discriminator.get_layer("down0_sn").layer.compute_dtype == "bfloat16"
    logits = discriminator(tf.ones((BATCH, 28, 28, 1)), training=True)
    assert logits.dtype == tf.float32
    layer = discriminator.get_layer("down1_sn")
    vector_u, kernel = layer.normalized_weights(training=False)
    assert layer.layer.kernel.dtype == vector_u.dtype == kernel.dtype == "float32"
    # sigma = v^T W u in float32 (in bfloat16 it would be ~4e-3 off)
    weights = layer.layer.kernel.numpy().reshape(-1, kernel.shape[-1]).astype(np.float64)
    u = vector_u.numpy().astype(np.float64)
    v = u @ weights.T / np.linalg.norm(u @ weights.T)
    sigma = (v @ weights @ u.T).item()
    np.testing.assert_allclose(kernel.numpy(), layer.layer.kernel.numpy() / sigma, rtol=1e-5)


@pytest.mark.parametrize("normalization", ["batch", "layer"])
def test_spectral_norm_rejects_normalization_layers(normalization):
    with pytest.raises(ValueError, match=f"needs normalization 'none', got '{normalization}'"):
        networks.dcgan_discriminator(
            resolution=28, channels=1, normalization=normalization, spectral_norm=True
        )


def test_pack_samples_stacks_consecutive_images_along_channels():
    images = np.arange(4 * 2 * 2 * 3, dtype=np.float32).reshape(4, 2, 2, 3)

    packed = networks.PackSamples(2)(images).numpy()

    assert packed.shape == (2, 2, 2, 6)
    np.testing.assert_array_equal(packed[1, :, :, :3], images[2])
    np.testing.assert_array_equal(packed[1, :, :, 3:], images[3])


def test_pack_samples_concatenates_points():
    points = np.arange(12, dtype=np.float32).reshape(6, 2)

    packed = networks.PackSamples(3)(points).numpy()

    np.testing.assert_array_equal(packed, [[0, 1, 2, 3, 4, 5], [6, 7, 8, 9, 10, 11]])


@pytest.mark.parametrize("build, inputs", [
    (lambda: networks.mlp_discriminator(pack=4), np.zeros((8, 2), np.float32)),
    (lambda: networks.dcgan_discriminator(resolution=28, channels=1, width=4, pack=4),
     np.zeros((8, 28, 28, 1), np.float32)),
])
def test_packed_discriminators_give_one_logit_per_pack(build, inputs):
    assert build()(inputs).shape == (2, 1)


def test_packed_discriminator_sees_each_sample_of_a_pack():
    discriminator = networks.mlp_discriminator(pack=2)
    points = np.zeros((2, 2), np.float32)
    changed = points.copy()
    changed[1] = 1.0  # the second sample of the only pack

    assert discriminator(points).numpy()[0, 0] != discriminator(changed).numpy()[0, 0]
