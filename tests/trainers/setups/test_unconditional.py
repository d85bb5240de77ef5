"""The unconditional setups' own hooks: the data and flags `check_data` refuses before anything
is built, how `--eval_every` ranks checkpoints (FID for images, `toy_selection` for the 2-D
toys), and the private discriminator phase of `--dp_l2_clip`."""

import dataclasses
import types

import keras
import numpy as np
import pytest

from datasets import registry as datasets
from tests.trainers.tiny import IMAGE_INFO, build_run, tiny_config
from trainers.config.flags import Config, ConfigError
from trainers.engine.phases import Privacy
from trainers.evaluation import image_evaluation
from trainers.setups import registry
from trainers.setups.kinds import toy_selection
from trainers.setups.protocol import Sampling
from trainers.setups.gans import refuse_mixing_layers
from trainers.setups.unconditional import UnconditionalGAN


def test_unknown_augmentation_is_a_config_error_before_building():
    config = tiny_config(diffaugment="rotate")
    with pytest.raises(ConfigError, match="--diffaugment"):
        registry.get(config.setup).check_data(config, IMAGE_INFO)


@pytest.mark.parametrize("flag, value", [("g_extra_blocks", 1), ("d_extra_blocks", 2),
                                         ("d_dropout", 0.3), ("g_upsample", "nearest"),
                                         ("consistency_weight", 0.5)])
def test_image_network_flags_are_refused_for_toys_before_building(flag, value):
    config = tiny_config(dataset="ring8", **{flag: value})
    with pytest.raises(ConfigError, match=f"--{flag}={value!r}.*is a toy \\(2-D points\\)"):
        registry.get(config.setup).check_data(config, datasets.dataset_info("ring8"))


def test_arch_is_refused_for_toys_before_building():
    config = tiny_config(dataset="ring8", arch="resnet")
    with pytest.raises(ConfigError, match="--arch='resnet' changes the convolutional image "
                                          "networks; dataset 'ring8' is a toy \\(2-D points\\)"):
        registry.get(config.setup).check_data(config, datasets.dataset_info("ring8"))


@pytest.mark.parametrize("gan", ["dcgan", "cgan"])
@pytest.mark.parametrize("flag, value, default", [
    ("g_extra_blocks", 1, 0), ("d_extra_blocks", 2, 0), ("d_dropout", 0.3, 0.0),
    ("g_upsample", "nearest", "transposed"), ("d_normalization", "layer", "none")])
def test_dcgan_only_flags_are_refused_with_the_resnet_arch(gan, flag, value, default):
    # cgan's preset normalizes D spectrally, which refuses any other normalization first.
    flags = {flag: value, **({"d_spectral_norm": False} if flag == "d_normalization" else {})}
    config = tiny_config(setup=gan, arch="resnet", **flags)
    with pytest.raises(ConfigError) as error:
        registry.get(config.setup).check_data(config, IMAGE_INFO)
    assert str(error.value) == (f"--{flag}={value!r} is not an option of the --arch=resnet "
                                f"networks; use --{flag}={default!r} or --arch=dcgan.")
    registry.get(config.setup).check_data(tiny_config(setup=gan, **flags), IMAGE_INFO)


def test_private_microbatches_must_split_over_every_workers_replicas():
    # --cpu_replicas=1 passes validation; two workers make 4 replicas, known only at build time.
    config = tiny_config(dp_l2_clip=1.0, dp_noise_multiplier=1.0, dp_microbatches=2,
                         batch_size=8)
    setup = registry.get(config.setup)
    setup.check_data(config, IMAGE_INFO, num_replicas=2)
    with pytest.raises(ConfigError) as error:
        setup.check_data(config, IMAGE_INFO, num_replicas=4)
    assert str(error.value) == ("--dp_microbatches=2: the 2 microbatches of a batch must split "
                                "evenly over the 4 replicas of all workers; use a multiple of 4 "
                                "(0 means one per example).")


@pytest.mark.parametrize("side", [16, 48, 512])
def test_unsupported_resolutions_are_refused_listing_the_supported_ones(side):
    config = tiny_config(arch="resnet")
    info = dataclasses.replace(IMAGE_INFO, shape=(side, side, 1))
    with pytest.raises(ConfigError, match=f"--resolution={side} .* one of 28, 32, 64, 128, 256"):
        registry.get(config.setup).check_data(config, info)


def test_images_rank_by_fid_on_the_basis_of_their_features_and_sample_count(monkeypatch):
    # The image evaluation loads a feature extractor and the test split: not needed to rank.
    # Ranked by the FID on the evaluation's own features, which with the sample count are its
    # basis (what best.json keeps a resume to).
    features = types.SimpleNamespace(record=lambda: {"name": "inception", "network": "a graph",
                                                     "checksum": "c1a5b0b4"})
    named = types.SimpleNamespace(key=lambda metric: f"{metric}_inception", extractor=features)
    monkeypatch.setattr(image_evaluation, "ImageEvaluation", lambda config, run: named)
    built = types.SimpleNamespace(sampling=Sampling(latent_shape=(8,), sample=None, model="generator"))
    evaluation = UnconditionalGAN().periodic_evaluation(tiny_config(eval_samples=300), built,
                                                        IMAGE_INFO)
    assert evaluation.selection({"fid_domain": 3.0, "fid_inception": 12.5, "precision": 0.1}) == 12.5
    assert evaluation.basis == {"evaluator": "inception", "evaluator_checksum": "c1a5b0b4",
                                "eval_samples": 300}


def test_toys_rank_by_toy_selection():
    ring8 = datasets.dataset_info("ring8")
    built = types.SimpleNamespace(sampling=Sampling(latent_shape=(8,), sample=None, model="generator"))
    evaluation = UnconditionalGAN().periodic_evaluation(tiny_config(dataset="ring8"), built, ring8)
    results = {"modes": 7, "high_quality": 0.5}
    assert evaluation.selection(results) == toy_selection(results, num_modes=8) == -(7 / 8 + 0.5)
    assert evaluation.basis == {}  # a fixed number of points, on no features


def test_a_sharp_toy_generator_beats_a_blur_that_touches_more_modes():
    # grid25, measured: an early blurry generator touched 23 modes with 3.6% high-quality
    # samples; ranking by modes first kept it over a sharp one with 21 modes and 79%.
    blur = toy_selection({"modes": 23, "high_quality": 0.036}, num_modes=25)
    sharp = toy_selection({"modes": 21, "high_quality": 0.79}, num_modes=25)

    assert sharp < blur
    assert sharp == pytest.approx(-(21 / 25 + 0.79))


def test_one_of_eight_modes_is_worth_twelve_and_a_half_points_of_quality():
    all_modes = toy_selection({"modes": 8, "high_quality": 0.80}, num_modes=8)

    assert all_modes < toy_selection({"modes": 7, "high_quality": 0.92}, num_modes=8)
    assert all_modes > toy_selection({"modes": 7, "high_quality": 0.93}, num_modes=8)


def test_a_private_dcgan_trains_on_two_replicas_with_noise_of_std_s_c_over_b():
    """The fakes are made for the whole batch (`Privacy.prepare`), so the generator's synchronized
    batch norm works on 2 replicas (it cannot sit in the per-microbatch loop). With noise
    multiplier 4 the private gradient's norm is the noise's, about sqrt(parameters) * 4 * C / B
    (the clipped mean adds at most C = 1 to it)."""
    config = tiny_config(dp_l2_clip=1.0, dp_noise_multiplier=4.0, cpu_replicas=2)
    built, trainer = build_run(config, replicas=2)
    assert [phase.privacy for phase in built.phases] == [
        Privacy(l2_clip=1.0, noise_multiplier=4.0), None]
    metrics = trainer.train(1).metrics
    parameters = sum(int(np.prod(v.shape)) for v in built.models["discriminator"].trainable_variables)
    noise_norm = np.sqrt(parameters) * 4.0 / config.batch_size
    assert metrics["discriminator/grad_norm"] == pytest.approx(noise_norm, rel=0.1)
    assert np.isfinite(metrics["discriminator/loss"]) and metrics["generator/grad_norm"] > 0


def test_privacy_is_refused_on_toys_and_for_a_discriminator_with_batch_norm():
    config = tiny_config(dataset="ring8", dp_l2_clip=1.0, dp_noise_multiplier=1.0)
    with pytest.raises(ConfigError, match="differential privacy is accounted over a finite "
                                          "training set, and dataset 'ring8' has no fixed number"):
        registry.get(config.setup).check_data(config, datasets.dataset_info("ring8"))
    inputs = keras.Input((28, 28, 1))
    normed = keras.layers.BatchNormalization(name="bn")(keras.layers.Conv2D(2, 3)(inputs))
    critic = keras.Model(inputs, keras.layers.Dense(1)(keras.layers.Flatten()(normed)))
    with pytest.raises(ConfigError, match=r"--dp_l2_clip: the discriminator's batch norm layers "
                                          r"\['bn'\] mix the examples"):
        refuse_mixing_layers(critic)


def test_the_privacy_flags_belong_to_the_generator_discriminator_setups():
    with pytest.raises(ConfigError, match=r"--dp_l2_clip=1.0 is invalid: only --setup=dcgan\|"):
        tiny_config(setup="cyclegan", domain_a="fashion_mnist:Sneaker", latent_dim=Config.latent_dim,
                    domain_b="fashion_mnist:Sandal", dp_l2_clip=1.0, dp_noise_multiplier=1.0)
    assert tiny_config(setup="cgan", dp_l2_clip=1.0, dp_noise_multiplier=1.0).dp_l2_clip == 1.0


def test_a_lazy_interval_without_a_penalty_is_refused_but_a_presets_own_is_not():
    with pytest.raises(ConfigError, match=r"--penalty_every=4 is invalid: --setup=dcgan trains "
                                          r"with --penalty=none, so there is no penalty"):
        tiny_config(setup="dcgan", penalty_every=4)
    assert tiny_config(setup="r1", penalty="none").penalty_every == 16
    assert tiny_config(setup="dcgan", penalty="r1", penalty_every=4).penalty_every == 4
