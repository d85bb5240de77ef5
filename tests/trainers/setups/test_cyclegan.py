"""--setup=cyclegan: a few tiny cycles on real Fashion-MNIST domains, then its summaries, samples,
evaluation and the flags it refuses."""

import dataclasses
import math
import re

import matplotlib.image
import numpy as np
import pytest
import tensorflow as tf

from gan import evaluator
from tests.image_folders import write_folder
from trainers.config.flags import Config, ConfigError
from trainers.engine.controller import LoopReport
from trainers.engine.trainer import LoopOutput
from trainers.modes import evaluate, export, sample, train
from trainers.outputs import summaries
from trainers.setups import registry

CYCLES = 3
BATCH = 4
DOMAINS = {"domain_a": "fashion_mnist:Sneaker", "domain_b": "fashion_mnist:Ankle boot"}


def cyclegan_config(**overrides) -> Config:
    base = Config(setup="cyclegan", batch_size=BATCH, g_width=4, d_width=4, seed=5,
                  shuffle_buffer=64, **DOMAINS)
    return registry.resolve(dataclasses.replace(base, **overrides))


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    # The cycle count known, the input pipeline reads only the examples those cycles draw.
    config = cyclegan_config(logdir=str(tmp_path_factory.mktemp("cyclegan") / "run"),
                             train_cycles=CYCLES)
    run = train.build(config)
    before = {name: [w.copy() for w in model.get_weights()] for name, model in run.state.models.items()}
    output = run.trainer.train(CYCLES)
    run.manager.save(checkpoint_number=CYCLES)
    train.write_config_once(config)  # what train.train records before its first cycle
    return config, run, before, output


def test_every_optimizer_steps_once_per_cycle(trained):
    _, run, _, _ = trained

    assert {name: int(o.iterations.numpy()) for name, o in run.state.optimizers.items()} == {
        "discriminator_a": CYCLES, "discriminator_b": CYCLES,
        "generator_ab": CYCLES, "generator_ba": CYCLES}
    assert int(run.state.step.numpy()) == CYCLES


def test_all_four_models_change_and_the_histories_fill(trained):
    _, run, before, _ = trained

    for name in ("generator_ab", "generator_ba", "discriminator_a", "discriminator_b"):
        after = run.state.models[name].get_weights()
        assert any(not np.array_equal(a, b) for a, b in zip(before[name], after)), name
    for name in ("history_a", "history_b"):
        history = run.state.models[name]
        assert int(history.count.numpy()) == CYCLES * BATCH
        stored = history.images.numpy()
        assert np.abs(stored[:CYCLES * BATCH]).sum(axis=(1, 2, 3)).min() > 0
        assert not stored[CYCLES * BATCH:].any()


def test_metrics_are_finite_and_the_losses_add_up_with_the_paper_weights(trained):
    _, _, _, output = trained
    m = output.metrics

    assert all(math.isfinite(value) for value in m.values())
    assert m["discriminators/nonfinite"] == 0 and m["generators/nonfinite"] == 0
    assert m["discriminators/loss"] == pytest.approx(
        m["discriminators/adversarial_a"] + m["discriminators/adversarial_b"], rel=1e-5)
    # least squares: the generator term is doubled to the paper's (D - 1)^2; cycle 10, identity 5.
    assert m["generators/loss"] == pytest.approx(
        2 * (m["generators/adversarial_ab"] + m["generators/adversarial_ba"])
        + 10 * (m["generators/cycle_a"] + m["generators/cycle_b"])
        + 5 * (m["generators/identity_a"] + m["generators/identity_b"]), rel=1e-5)
    assert {"generators/grad_norm_generator_ab",
            "discriminators/learning_rate_discriminator_b"} <= set(m)


def test_translation_summaries_show_input_translation_and_cycle(trained, tmp_path):
    config, run, _, _ = trained
    [action] = run.setup.summaries(dataclasses.replace(config, image_every=5), run.built, run.info)
    writer = tf.summary.create_file_writer(str(tmp_path))

    with writer.as_default():
        action.fn(LoopReport(step=5, output=LoopOutput({}, {}), images_per_second=0.0, seconds=0.0))
    writer.close()

    assert action.every == 5
    assert summaries.read_event_tags(str(tmp_path))["images"] == {"translation_ab", "translation_ba"}
    image = _summary_image(str(tmp_path), "translation_ab")
    assert image.shape == (3 * 28 + 4, 8 * 28 + 9, 1)


def _summary_image(logdir, tag):
    """The decoded image of `tag` in the event file under `logdir` (image summaries hold width,
    height, then the PNG)."""
    for path in tf.io.gfile.glob(f"{logdir}/events.*"):
        for record in tf.data.TFRecordDataset(path):
            for value in tf.compat.v1.Event.FromString(record.numpy()).summary.value:
                if value.tag == tag:
                    return tf.io.decode_png(tf.make_ndarray(value.tensor)[2]).numpy()
    raise AssertionError(f"no image {tag!r} under {logdir}")


def test_a_cyclegan_run_draws_nothing_from_noise(trained):
    _, run, _, _ = trained

    assert run.built.sampling is None


def test_sample_mode_translates_test_images(trained, tmp_path):
    config, _, _, _ = trained
    common = Config(mode="sample", logdir=config.logdir, num_samples=3)

    wrote = sample.sample(dataclasses.replace(common, output=str(tmp_path / "ab.png")))
    sample.sample(dataclasses.replace(common, output=str(tmp_path / "ba.npy"), direction="ba"))

    assert wrote.count == 3 and wrote.checkpoint.endswith(f"ckpt-{CYCLES}")
    assert matplotlib.image.imread(tmp_path / "ab.png").shape[:2] == (3 * 28 + 4, 3 * 28 + 4)
    translated = np.load(tmp_path / "ba.npy")
    assert translated.shape == (3, 28, 28, 1) and translated.dtype == np.uint8


@pytest.mark.parametrize("flag", [{"grid": "2x2"}, {"interpolate": 3}, {"label": "7"}])
def test_sample_mode_refuses_noise_layouts(trained, tmp_path, flag):
    config, _, _, _ = trained
    with pytest.raises(ConfigError, match="translates test images"):
        sample.sample(Config(mode="sample", logdir=config.logdir, output=str(tmp_path / "x.png"),
                             **flag))


def test_eval_mode_scores_both_directions(trained, tmp_path):
    config, _, _, _ = trained
    path = str(tmp_path / "features.keras")
    classifier = evaluator.build_classifier(input_shape=(28, 28, 1), num_classes=10, width=4,
                                            feature_dim=8)
    classifier.save(path)

    results = evaluate.evaluate(Config(mode="eval", logdir=config.logdir, eval_samples=20,
                                       evaluator=path))

    for direction in ("ab", "ba"):
        assert results[direction]["num_samples"] == 20
        assert results[direction]["fid_custom"] > 0
        assert 0 <= results[direction]["precision_custom"] <= 1
        assert results[direction]["features"]["name"] == "custom"
    assert results["step"] == CYCLES and results["evaluator"] == path


def test_export_mode_refuses_a_cyclegan_run(trained):
    config, _, _, _ = trained
    with pytest.raises(ConfigError, match="CycleGAN runs"):
        export.export(Config(mode="export", logdir=config.logdir))


@pytest.mark.parametrize("overrides, flag", [
    ({"domain_b": ""}, "--domain_b=''"),
    ({"dataset": "tfds:mnist"}, "--dataset='tfds:mnist'"),
    ({"penalty": "r1"}, "--penalty='r1'"),
    ({"penalty_every": 4}, "--penalty_every=4 is invalid: only --setup=dcgan|wgan|wgan_gp|lsgan|sn"),
    ({"update_order": "simultaneous"}, "--update_order='simultaneous'"),
    ({"loss": "wasserstein"}, "--loss='wasserstein'"),
    ({"eval_every": 100}, "--eval_every=100 is invalid: --setup=cyclegan is evaluated after "
                          "training, with --mode=eval"),
    ({"latent_dim": 64}, "--latent_dim=64 is invalid: only --setup=dcgan|"),
    ({"ema_halflife_kimg": 10.0}, "--ema_halflife_kimg=10.0 is invalid: only --setup=dcgan|"),
    ({"direction": "ac"}, "--direction='ac'"),
    ({"g_extra_blocks": 1}, "--g_extra_blocks=1"),
    ({"g_upsample": "nearest"}, "--g_upsample='nearest'"),
    ({"d_dropout": 0.3}, "--d_dropout=0.3"),
    ({"arch": "resnet"}, "--arch='resnet' is invalid: only --setup=dcgan|wgan|wgan_gp|lsgan|"
                         "sngan|r1|r3gan|cgan|acgan|dfad reads it and this run is --setup=cyclegan"),
])
def test_flags_cyclegan_cannot_honour_are_refused(overrides, flag):
    with pytest.raises(ConfigError) as error:
        cyclegan_config(**overrides)
    assert flag in str(error.value)


def test_domains_need_gan_cyclegan():
    with pytest.raises(ConfigError, match="--domain_a='fashion_mnist:Bag'.*--setup=cyclegan"):
        registry.resolve(Config(domain_a="fashion_mnist:Bag"))


def test_missing_domains_give_an_example():
    with pytest.raises(ConfigError, match="--domain_a=fashion_mnist:Sneaker"):
        registry.resolve(Config(setup="cyclegan"))


def test_trains_on_two_tfds_domains_such_as_horse2zebra(tmp_path, monkeypatch):
    """TFDS's own mock data stands in for cycle_gan/horse2zebra (no download here): the domain
    specs, metadata, split pairs, crop and resize are the real code path."""
    import tensorflow_datasets as tfds

    from datasets import tfds_source

    monkeypatch.setattr(tfds_source, "ensure_prepared", lambda builder: None)
    with tfds.testing.mock_data(num_examples=6, policy=tfds.testing.MockPolicy.USE_CODE):
        config = cyclegan_config(domain_a="tfds:cycle_gan/horse2zebra:A",
                                 domain_b="tfds:cycle_gan/horse2zebra:B", resolution=32,
                                 logdir=str(tmp_path / "run"))
        run = train.build(config)
        before = run.state.models["generator_ab"].get_weights()
        output = run.trainer.train(2)

    assert run.info.shape == (32, 32, 3)
    assert int(run.state.step.numpy()) == 2
    assert all(math.isfinite(value) for value in output.metrics.values())
    after = run.state.models["generator_ab"].get_weights()
    assert any(not np.array_equal(a, b) for a, b in zip(before, after))


def test_a_batch_larger_than_either_domain_is_refused_naming_that_domain(tmp_path):
    small = write_folder(str(tmp_path / "small"), 3, side=28, channels=1)
    config = cyclegan_config(domain_a="fashion_mnist", domain_b=f"folder:{small}",
                             logdir=str(tmp_path / "run"))
    # Picked classes are not counted before reading the labels.
    picked = cyclegan_config(logdir=str(tmp_path / "run"))
    setup = registry.get("cyclegan")
    assert setup.training_sets(config, setup.dataset_info(config)) == {
        "--domain_a='fashion_mnist'": 60_000, f"--domain_b='folder:{small}'": 3}
    assert setup.training_sets(picked, setup.dataset_info(picked)) == {
        "--domain_a='fashion_mnist:Sneaker'": None, "--domain_b='fashion_mnist:Ankle boot'": None}
    with pytest.raises(ConfigError, match=re.escape(
            f"--batch_size={BATCH} is larger than the training set: --domain_b='folder:{small}' "
            "has 3 examples, and a larger batch would hold some twice; use --batch_size=3 or "
            "less.")):
        train.build(config)
