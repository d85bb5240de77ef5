"""cgan and acgan setups: their phase losses on known logits, fake labels, balanced sampling,
the per-class sample grid, training on tiny models, and the data and flags they reject."""

import math
import types

import numpy as np
import pytest
import tensorflow as tf

from datasets import registry
from tests.trainers import tiny
from tests.trainers.tiny import tiny_config
from trainers import actions, conditional, presets
from trainers.engine.controller import LoopReport
from trainers.config.fields import ConfigError
from trainers.engine.phases import StepInputs
from trainers.engine.trainer import LoopOutput

CLASSES = 3
LABELLED_INFO = types.SimpleNamespace(kind="image", shape=(28, 28, 1), modes=None,
                                      num_classes=CLASSES)
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
    return tiny.build_setup_and_trainer(config, phase_names=phase_names, info=LABELLED_INFO,
                                        dataset_fn=labelled_dataset_fn)


def step_inputs(real, seed=(5, 6)) -> StepInputs:
    size = int(real["x"].shape[0])
    return StepInputs(real=real, seed=tf.constant(seed, tf.int64), global_batch_size=size,
                      replica_batch_size=size, replica_index=0, cycle=tf.constant(0, tf.int64))


def softplus(x):
    return np.log1p(np.exp(x))


def cross_entropy(labels, logits):
    logits = np.asarray(logits, np.float64)
    return np.log(np.exp(logits).sum(axis=1)) - logits[np.arange(len(labels)), labels]


def test_acgan_losses_on_known_logits():
    """D: adversarial + aux * (CE real + CE fake); G: adversarial + aux * CE (its labels).

    The stand-in discriminator reads one pixel v of each image and answers logit v and class
    logits (v, 0, -v); real images hold r_i, the stand-in generator's fakes f_i.
    """
    r = np.array([1.0, -2.0, 0.5, 3.0], np.float32)
    f = np.array([-1.0, 0.25, 2.0, -0.5], np.float32)
    real_labels = np.array([0, 2, 1, 1])

    def discriminator(images, training):
        v = images[:, 0, 0, :]
        return v, tf.concat([v, tf.zeros_like(v), -v], axis=1)

    def generator(inputs, training):
        return tf.reshape(tf.constant(f), [-1, 1, 1, 1]) * tf.ones([4, 28, 28, 1])

    models = {"generator": generator, "discriminator": discriminator}
    d_phase, g_phase = conditional.conditional_phases(tiny_config(gan="acgan", aux_weight=0.5),
                                                      num_classes=CLASSES)
    inputs = step_inputs({"x": tf.reshape(tf.constant(r), [-1, 1, 1, 1]) * tf.ones([4, 28, 28, 1]),
                          "label": tf.constant(real_labels, tf.int64)})
    fake_labels = conditional.fake_labels(inputs, CLASSES).numpy()
    real_classes = np.stack([r, 0 * r, -r], axis=1)
    fake_classes = np.stack([f, 0 * f, -f], axis=1)

    d = d_phase.loss(models, inputs)
    adversarial = np.mean(softplus(-r) + softplus(f))
    real_ce = np.mean(cross_entropy(real_labels, real_classes))
    fake_ce = np.mean(cross_entropy(fake_labels, fake_classes))
    assert float(d.loss) == pytest.approx(adversarial + 0.5 * (real_ce + fake_ce), rel=1e-5)
    assert float(d.metrics["adversarial"]) == pytest.approx(adversarial, rel=1e-5)
    assert float(d.metrics["real_class_loss"]) == pytest.approx(real_ce, rel=1e-5)
    assert float(d.metrics["fake_class_loss"]) == pytest.approx(fake_ce, rel=1e-5)
    assert float(d.metrics["real_accuracy"]) == pytest.approx(
        np.mean(real_classes.argmax(1) == real_labels))

    g = g_phase.loss(models, inputs)
    g_expected = np.mean(softplus(-f)) + 0.5 * fake_ce
    assert float(g.metrics["adversarial"]) == pytest.approx(np.mean(softplus(-f)), rel=1e-5)
    assert float(g.loss) == pytest.approx(g_expected, rel=1e-5)
    assert float(g.metrics["accuracy"]) == pytest.approx(np.mean(fake_classes.argmax(1) == fake_labels))

    [both] = conditional.conditional_phases(
        tiny_config(gan="acgan", aux_weight=0.5, update_order="simultaneous"), num_classes=CLASSES)
    output = both.loss(models, inputs)
    assert both.models == ("discriminator", "generator") and both.per_model_losses
    assert float(output.model_losses["discriminator"]) == pytest.approx(float(d.loss), rel=1e-6)
    assert float(output.model_losses["generator"]) == pytest.approx(g_expected, rel=1e-5)


def test_cgan_discriminator_scores_real_images_with_their_labels_and_fakes_with_drawn_ones():
    seen = []

    def discriminator(inputs, training):
        images, labels = inputs
        seen.append(labels.numpy())
        return tf.cast(tf.reshape(labels, [-1, 1]), tf.float32)

    def generator(inputs, training):
        return tf.zeros([4, 28, 28, 1])

    d_phase, _ = conditional.conditional_phases(tiny_config(gan="cgan"), num_classes=CLASSES)
    inputs = step_inputs({"x": tf.zeros([4, 28, 28, 1]), "label": tf.constant([2, 2, 1, 0], tf.int64)})
    output = d_phase.loss({"generator": generator, "discriminator": discriminator}, inputs)
    fake_labels = conditional.fake_labels(inputs, CLASSES).numpy()
    np.testing.assert_array_equal(seen[0], [2, 2, 1, 0])
    np.testing.assert_array_equal(seen[1], fake_labels)
    # hinge: relu(1 - D(real)) + relu(1 + D(fake)), with D = the label
    expected = np.mean(np.maximum(0, 1 - np.array([2, 2, 1, 0])) + np.maximum(0, 1 + fake_labels))
    assert float(output.loss) == pytest.approx(expected)


def test_fake_labels_are_uniform_over_the_classes():
    inputs = step_inputs({"x": tf.zeros([10_000, 1])})
    labels = conditional.fake_labels(inputs, 10).numpy()
    counts = np.bincount(labels, minlength=10)
    assert labels.dtype == np.int32 and len(counts) == 10
    assert counts.min() > 900 and counts.max() < 1100
    # Another update's key draws other labels.
    other = conditional.fake_labels(step_inputs({"x": tf.zeros([10_000, 1])}, seed=(7, 8)), 10)
    assert np.mean(other.numpy() != labels) > 0.8


@pytest.mark.parametrize("gan, topk", [("cgan", 1.0), ("acgan", 1.0), ("acgan", 0.5)])
def test_training_changes_both_models_and_keeps_metrics_finite(gan, topk):
    setup, trainer = build(tiny_config(gan=gan, topk=topk))
    before = {name: [v.numpy().copy() for v in model.trainable_variables]
              for name, model in setup.models.items()}
    metrics = trainer.train(2).metrics
    assert all(math.isfinite(value) for value in metrics.values())
    assert metrics["discriminator/nonfinite"] == metrics["generator/nonfinite"] == 0.0
    for name, model in setup.models.items():
        after = model.trainable_variables
        assert any(not np.array_equal(a, v.numpy()) for a, v in zip(before[name], after)), name
    if gan == "acgan":
        assert {"discriminator/real_accuracy", "discriminator/fake_class_loss", "generator/class_loss",
                "generator/accuracy"} <= set(metrics)
        assert 0.0 <= metrics["generator/accuracy"] <= 1.0


def test_cgan_generator_step_leaves_the_spectrally_normalized_discriminator_alone():
    setup, trainer = build(tiny_config(gan="cgan"), phase_names={"generator"})
    discriminator = setup.models["discriminator"]
    before = [v.numpy().copy() for v in discriminator.variables]
    trainer.train(2)
    assert all(np.array_equal(a, v.numpy()) for a, v in zip(before, discriminator.variables))


def test_augmentation_lazy_r1_and_ema_work_with_labels():
    config = tiny_config(gan="cgan", diffaugment="translation", penalty="r1", penalty_weight=2.0,
                         penalty_every=2, ema_halflife_kimg=0.01)
    setup, trainer = build(config)
    assert [p.name for p in setup.phases] == ["discriminator", "penalty", "generator"]
    assert sorted(setup.optimizers) == ["discriminator", "generator"]
    ema_before = [v.numpy().copy() for v in setup.models["generator_ema"].trainable_variables]
    metrics = trainer.train(2).metrics
    assert all(math.isfinite(value) for value in metrics.values())
    assert metrics["penalty/loss"] == pytest.approx(2.0 * 2 * metrics["penalty/r1"], rel=1e-5)
    assert int(setup.optimizers["discriminator"].iterations.numpy()) == 2 + 1
    assert any(not np.array_equal(a, v.numpy())
               for a, v in zip(ema_before, setup.models["generator_ema"].trainable_variables))


def test_sample_draws_balanced_labels_with_the_sampling_model():
    setup, _ = build(tiny_config(gan="acgan"))
    assert setup.num_classes == CLASSES
    noise = tf.random.normal([7, 8], seed=1)
    np.testing.assert_array_equal(
        setup.sample(noise).numpy(),
        setup.sample_labeled(noise, tf.constant([0, 1, 2, 0, 1, 2, 0], tf.int64)).numpy())
    assert not np.array_equal(setup.sample_labeled(noise, tf.zeros([7], tf.int32)).numpy(),
                              setup.sample(noise).numpy())


def test_class_grid_summary_has_one_row_per_class(tmp_path):
    setup, _ = build(tiny_config(gan="acgan"))
    noise = tf.random.stateless_normal([10, 8], seed=[2, 0])
    action = actions.class_sample_summaries(every=1, sample_labeled=setup.sample_labeled,
                                            num_classes=CLASSES, noise=noise)
    writer = tf.summary.create_file_writer(str(tmp_path))
    with writer.as_default():
        action.fn(LoopReport(step=3, output=LoopOutput(metrics={}, gradients={}),
                             images_per_second=0.0, seconds=0.0))
    writer.close()
    [path] = tf.io.gfile.glob(str(tmp_path / "*tfevents*"))
    images = [tf.io.decode_png(tf.make_ndarray(value.tensor)[2])
              for event in tf.compat.v1.train.summary_iterator(path)
              for value in event.summary.value if value.tag == "samples_by_class"]
    assert action.name == "samples_by_class" and len(images) == 1
    # 3 rows x 10 columns of 28-pixel cells with 1-pixel padding all round
    assert images[0].shape == (3 * 28 + 4, 10 * 28 + 11, 1)
    grid = images[0].numpy()[:, :, 0]
    cells = [[grid[1 + 29 * r:29 * (r + 1), 1 + 29 * c:29 * (c + 1)] for c in range(10)] for r in range(3)]
    # Each row is one class: the same noise column gives a different image in another row.
    assert not np.array_equal(cells[0][0], cells[1][0])
    # Row 1, column 4: class 1 drawn from noise[4].
    expected = setup.sample_labeled(noise[4:5], tf.constant([1]))[0, :, :, 0].numpy()
    np.testing.assert_allclose(cells[1][4], np.floor((expected + 1) * 127.5 + 0.5), atol=1)


@pytest.mark.parametrize("gan", ["cgan", "acgan"])
@pytest.mark.parametrize("info", [
    registry.dataset_info("ring8"),
    types.SimpleNamespace(kind="image", shape=(28, 28, 1), modes=None, num_classes=None),
], ids=["ring8", "unlabelled"])
def test_data_without_labelled_images_is_rejected_before_anything_is_built(gan, info):
    with pytest.raises(ConfigError, match=f"--gan={gan} is class-conditional and needs labelled images"):
        presets.check_dataset(tiny_config(gan=gan, dataset="ring8"), info)
    with pytest.raises(ConfigError, match="labelled images"):
        presets.build_setup(tiny_config(gan=gan), info, tf.distribute.get_strategy())


def test_the_gradient_penalty_is_rejected_naming_the_flag():
    with pytest.raises(ConfigError, match="--penalty='gradient_penalty' is not supported"):
        presets.check_dataset(tiny_config(gan="cgan", penalty="gradient_penalty", penalty_weight=10.0),
                              LABELLED_INFO)
