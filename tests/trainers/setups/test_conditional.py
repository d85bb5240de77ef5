"""cgan and acgan setups: balanced sampling, the per-class sample grid, training on tiny models,
and the data and flags they reject. (Their losses on known logits are in test_adversarial.)"""

import dataclasses
import math
import types

import numpy as np
import pytest
import tensorflow as tf

from datasets import registry as datasets
from tests.trainers import tiny
from tests.trainers.tiny import tiny_config
from trainers.config.flags import ConfigError
from trainers.engine.controller import LoopReport
from trainers.engine.trainer import LoopOutput
from trainers.setups import building, registry
from trainers.setups.adversarial import Conditioning
from trainers.setups.conditional import CLASS_GRID_COLUMNS, AuxiliaryClassifierGAN, ConditionalGAN
from trainers.setups.draws import fixed_noise
from trainers.setups.kinds import GAN_FLAG_OWNERS

CLASSES = 3
LABELLED_INFO = dataclasses.replace(datasets.dataset_info("fashion_mnist"), num_classes=CLASSES,
                                    class_names=None)
EXAMPLES = 48


def labelled_dataset_fn(strategy, config):
    """Shuffled, repeated synthetic images with labels 0, 1, 2, 0, ..."""
    images = tf.random.stateless_uniform([EXAMPLES, 28, 28, 1], seed=[4, 2]) * 2 - 1
    labels = tf.range(EXAMPLES, dtype=tf.int64) % CLASSES

    def make(global_batches_done):
        def input_fn(context):
            dataset = tf.data.Dataset.from_tensor_slices({"x": images, "label": labels})
            dataset = dataset.shuffle(EXAMPLES, seed=config.seed).repeat()
            dataset = dataset.batch(context.get_per_replica_batch_size(config.batch_size),
                                    drop_remainder=True)
            return dataset.skip(global_batches_done * context.num_replicas_in_sync)
        return strategy.distribute_datasets_from_function(input_fn)

    return make


def build(config, *, phase_names=None):
    return tiny.build_run(config, phase_names=phase_names, info=LABELLED_INFO,
                          dataset_fn=labelled_dataset_fn)


@pytest.mark.parametrize("gan, topk, arch", [("cgan", 1.0, "dcgan"), ("acgan", 1.0, "dcgan"),
                                             ("acgan", 0.5, "dcgan"), ("cgan", 1.0, "resnet")])
def test_training_changes_both_models_and_keeps_metrics_finite(gan, topk, arch):
    built, trainer = build(tiny_config(setup=gan, topk=topk, arch=arch))
    before = {name: [v.numpy().copy() for v in model.trainable_variables]
              for name, model in built.models.items()}
    metrics = trainer.train(2).metrics
    assert all(math.isfinite(value) for value in metrics.values())
    assert metrics["discriminator/nonfinite"] == metrics["generator/nonfinite"] == 0.0
    for name, model in built.models.items():
        after = model.trainable_variables
        assert any(not np.array_equal(a, v.numpy()) for a, v in zip(before[name], after)), name
    if gan == "acgan":
        assert {"discriminator/real_accuracy", "discriminator/fake_class_loss", "generator/class_loss",
                "generator/accuracy"} <= set(metrics)
        assert 0.0 <= metrics["generator/accuracy"] <= 1.0


def test_cgan_generator_step_leaves_the_spectrally_normalized_discriminator_alone():
    built, trainer = build(tiny_config(setup="cgan"), phase_names={"generator"})
    discriminator = built.models["discriminator"]
    before = [v.numpy().copy() for v in discriminator.variables]
    trainer.train(2)
    assert all(np.array_equal(a, v.numpy()) for a, v in zip(before, discriminator.variables))


def test_augmentation_lazy_r1_and_ema_work_with_labels():
    config = tiny_config(setup="cgan", diffaugment="translation", penalty="r1", penalty_weight=2.0,
                         penalty_every=2, ema_halflife_kimg=0.01)
    built, trainer = build(config)
    assert [p.name for p in built.phases] == ["discriminator", "penalty", "generator"]
    assert sorted(built.optimizers) == ["discriminator", "generator"]
    ema_before = [v.numpy().copy() for v in built.models["generator_ema"].trainable_variables]
    metrics = trainer.train(2).metrics
    assert all(math.isfinite(value) for value in metrics.values())
    assert metrics["penalty/loss"] == pytest.approx(2.0 * 2 * metrics["penalty/r1"], rel=1e-5)
    assert int(built.optimizers["discriminator"].iterations.numpy()) == 2 + 1
    assert any(not np.array_equal(a, v.numpy())
               for a, v in zip(ema_before, built.models["generator_ema"].trainable_variables))


def test_sample_draws_balanced_labels_with_the_sampling_model():
    built, _ = build(tiny_config(setup="acgan"))
    labeled = Conditioning(num_classes=10).labeled_sampler(built.models[built.sampling.model])
    noise = tf.random.normal([7, 8], seed=1)
    np.testing.assert_array_equal(
        built.sampling.sample(noise).numpy(),
        labeled(noise, tf.constant([0, 1, 2, 0, 1, 2, 0], tf.int64)).numpy())
    assert not np.array_equal(labeled(noise, tf.zeros([7], tf.int32)).numpy(),
                              built.sampling.sample(noise).numpy())


def test_class_grid_summary_has_one_row_per_class(tmp_path):
    config = dataclasses.replace(tiny_config(setup="acgan"), image_every=1)
    built, _ = build(config)
    jobs = ConditionalGAN().summaries(config, built, LABELLED_INFO)
    [action] = [job for job in jobs if job.name == "samples_by_class"]
    writer = tf.summary.create_file_writer(str(tmp_path))
    with writer.as_default():
        action.fn(LoopReport(step=3, output=LoopOutput(metrics={}, gradients={}),
                             images_per_second=0.0, seconds=0.0))
    writer.close()
    [path] = tf.io.gfile.glob(str(tmp_path / "*tfevents*"))
    images = [tf.io.decode_png(tf.make_ndarray(value.tensor)[2])
              for event in tf.compat.v1.train.summary_iterator(path)
              for value in event.summary.value if value.tag == "samples_by_class"]
    assert action.every == 1 and len(images) == 1
    # 3 rows x 10 columns of 28-pixel cells with 1-pixel padding all round
    assert images[0].shape == (3 * 28 + 4, 10 * 28 + 11, 1)
    grid = images[0].numpy()[:, :, 0]
    cells = [[grid[1 + 29 * r:29 * (r + 1), 1 + 29 * c:29 * (c + 1)] for c in range(10)] for r in range(3)]
    # Each row is one class: the same noise column gives a different image in another row.
    assert not np.array_equal(cells[0][0], cells[1][0])
    # Row 1, column 4: class 1 drawn from the run's fixed noise[4].
    noise = fixed_noise(config, built.sampling.latent_shape, CLASS_GRID_COLUMNS)
    labeled = Conditioning(num_classes=10).labeled_sampler(built.models[built.sampling.model])
    expected = labeled(noise[4:5], tf.constant([1]))
    np.testing.assert_allclose(cells[1][4], np.floor((expected[0, :, :, 0].numpy() + 1) * 127.5 + 0.5),
                               atol=1)


@pytest.mark.parametrize("gan", ["cgan", "acgan"])
@pytest.mark.parametrize("info", [
    datasets.dataset_info("ring8"),
    types.SimpleNamespace(kind="image", shape=(28, 28, 1), modes=None, num_classes=None),
], ids=["ring8", "unlabelled"])
def test_data_without_labelled_images_is_rejected_before_anything_is_built(gan, info):
    config = tiny_config(setup=gan, dataset="ring8")
    with pytest.raises(ConfigError, match=f"--setup={gan} is class-conditional and needs labelled images"):
        registry.get(gan).check_data(config, info)
    with pytest.raises(ConfigError, match="labelled images"):
        building.build_run(registry.get(gan), tiny_config(setup=gan), info,
                           tf.distribute.get_strategy())


@pytest.mark.parametrize("penalty", ["gradient_penalty", "one_sided_gradient_penalty"])
@pytest.mark.parametrize("every", [1, 4])
def test_the_gradient_penalties_are_rejected_naming_the_flag_eager_or_lazy(penalty, every):
    with pytest.raises(ConfigError, match=f"--penalty='{penalty}' is not supported"):
        tiny_config(setup="cgan", penalty=penalty, penalty_weight=10.0, penalty_every=every)



def test_cgan_and_acgan_are_two_setups_each_with_its_own_preset():
    cgan, acgan = registry.get("cgan"), registry.get("acgan")
    assert (type(cgan), type(acgan)) == (ConditionalGAN, AuxiliaryClassifierGAN)
    assert (set(cgan.presets), set(acgan.presets)) == ({"cgan"}, {"acgan"})
    assert (cgan.conditioning(tiny_config(setup="cgan"), LABELLED_INFO),
            acgan.conditioning(tiny_config(setup="acgan"), LABELLED_INFO)) == (
        Conditioning(num_classes=CLASSES), Conditioning(num_classes=CLASSES, classifier=True))


def test_aux_weight_is_read_by_acgan_alone():
    assert tiny_config(setup="acgan", aux_weight=0.5).aux_weight == 0.5
    with pytest.raises(ConfigError) as error:
        tiny_config(setup="cgan", aux_weight=0.5)
    assert str(error.value) == ("--aux_weight=0.5 is invalid: only --setup=acgan reads it and this "
                                "run is --setup=cgan; drop it, or train one of those.")
    assert (registry.get("cgan").flag_owners, registry.get("acgan").flag_owners) == (
        (*GAN_FLAG_OWNERS, "conditional"), (*GAN_FLAG_OWNERS, "conditional", "acgan"))
