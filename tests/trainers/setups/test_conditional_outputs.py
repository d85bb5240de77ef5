"""What a user does with a trained conditional run besides training: `--label` parsing, the
sample layouts, class accuracy and intra-FID, `--mode=eval` and the exported signatures."""

import dataclasses
import json
import os
import warnings

import keras
import matplotlib.image
import numpy as np
import pytest
import tensorflow as tf

from datasets import registry
from gan import evaluation, metrics
from gan.features import keras_features
from tests.gan.synthetic_evaluator import write_evaluator
from tests.trainers.synthetic_run import write_run
from tests.trainers.tflite_tolerance import TFLITE_TOLERANCE
from trainers.modes import evaluate as eval_mode
from trainers.modes import export
from trainers.modes import sample as sample_mode
from trainers.setups import draws
from trainers.setups import registry as setup_registry
from trainers.outputs import images
from trainers.config.flags import Config, ConfigError
from trainers.config.validation import class_index
from trainers.evaluation import tags

NAMES = registry.dataset_info("fashion_mnist").class_names
SNEAKER = 7


# --label parsing and validation ------------------------------------------------------------

def test_a_class_is_an_index_or_a_name_in_any_case():
    assert class_index("7", flag="label", num_classes=10, class_names=NAMES) == SNEAKER
    assert class_index("sneaker", flag="label", num_classes=10, class_names=NAMES) == SNEAKER
    assert class_index(" ANKLE boot", flag="label", num_classes=10, class_names=NAMES) == 9
    assert class_index("t-shirt/top", flag="label", num_classes=10, class_names=NAMES) == 0
    assert class_index("3", flag="label", num_classes=4) == 3


@pytest.mark.parametrize("value", ["Sneakers", "10", "-1", ""])
def test_a_bad_class_lists_the_valid_ones(value):
    with pytest.raises(ConfigError) as error:
        class_index(value, flag="label", num_classes=10, class_names=NAMES)
    message = str(error.value)
    assert f"--label={value!r}" in message and "0..9" in message
    assert "'Sneaker'" in message and "'Ankle boot'" in message
    with pytest.raises(ConfigError, match=r"use a class index 0\.\.3\.$"):
        class_index("Sneaker", flag="domain_a", num_classes=4)


def test_label_is_only_a_sample_mode_flag():
    assert setup_registry.resolve((Config(mode="sample", label="Sneaker"))).label == "Sneaker"
    for mode in ("train", "eval", "export"):
        with pytest.raises(ConfigError, match="--label='3' .*drop it"):
            setup_registry.resolve((Config(mode=mode, label="3")))


# Sample layouts (no model) -------------------------------------------------------------------

def _sample_config(**fields) -> Config:
    return setup_registry.resolve((Config(mode="sample", seed=4, **fields)))


def test_one_label_draws_every_sample_of_that_class_from_the_seeds_noise():
    draw = draws.plan_draw(_sample_config(num_samples=5), latent_shape=(8,), num_classes=10,
                              label=SNEAKER)
    assert draw.rows is None and draw.labels.dtype == tf.int32
    assert draw.labels.numpy().tolist() == [SNEAKER] * 5
    np.testing.assert_array_equal(draw.noise, draws.sample_noise(4, 5, (8,)))


def test_without_a_label_each_row_is_a_class_and_each_column_one_noise_vector():
    draw = draws.plan_draw(_sample_config(), latent_shape=(8,), num_classes=10)
    # The default 64 samples give 64 // 10 = 6 columns.
    assert draw.rows == 10 and draw.noise.shape == (60, 8)
    assert draw.labels.numpy().tolist() == [row for row in range(10) for _ in range(6)]
    columns = draw.noise.numpy().reshape(10, 6, 8)
    np.testing.assert_array_equal(columns, np.broadcast_to(columns[:1], columns.shape))
    np.testing.assert_array_equal(columns[0], draws.sample_noise(4, 6, (8,)))
    assert draws.plan_draw(_sample_config(num_samples=3), latent_shape=(8,),
                              num_classes=10).noise.shape == (10, 8)


def test_a_grid_without_a_label_needs_one_row_per_class():
    draw = draws.plan_draw(_sample_config(grid="10x3"), latent_shape=(8,), num_classes=10)
    assert draw.rows == 10
    assert draw.labels.numpy().tolist() == [row for row in range(10) for _ in range(3)]
    with pytest.raises(ConfigError, match="--grid='4x3' .*use --grid=10x3"):
        draws.plan_draw(_sample_config(grid="4x3"), latent_shape=(8,), num_classes=10)
    labeled = draws.plan_draw(_sample_config(grid="4x3"), latent_shape=(8,), num_classes=10,
                                 label=2)
    assert labeled.rows == 4 and labeled.labels.numpy().tolist() == [2] * 12


def test_interpolation_rows_stay_within_one_class():
    config = _sample_config(interpolate=4, num_samples=3, truncation=0.8)
    draw = draws.plan_draw(config, latent_shape=(8,), num_classes=10)
    assert draw.rows == 3 and draw.noise.shape == (12, 8)
    assert draw.labels.numpy().tolist() == [0] * 4 + [1] * 4 + [2] * 4
    ends = draws.truncate_noise(draws.sample_noise(4, 6, (8,)), psi=0.8, seed=4).numpy()
    np.testing.assert_allclose(draw.noise.numpy()[[0, 3, 4, 7]], ends[:4], atol=1e-6)
    one = draws.plan_draw(config, latent_shape=(8,), num_classes=10, label=5)
    assert one.labels.numpy().tolist() == [5] * 12


def test_unconditional_layout_has_no_labels():
    draw = draws.plan_draw(_sample_config(num_samples=6), latent_shape=(8,))
    assert draw.labels is None and draw.rows is None
    np.testing.assert_array_equal(draw.noise, draws.sample_noise(4, 6, (8,)))
    with pytest.raises(ValueError, match="label=10"):
        draws.plan_draw(_sample_config(), latent_shape=(8,), num_classes=10, label=10)


# Class accuracy and intra-FID --------------------------------------------------------------

def test_class_accuracy_is_the_fraction_predicted_as_asked():
    assert metrics.class_accuracy(np.array([0, 1, 2, 2]), np.array([0, 1, 2, 0])) == 0.75
    assert metrics.class_accuracy([3, 3], [3, 3]) == 1.0
    with pytest.raises(ValueError, match="one prediction per label"):
        metrics.class_accuracy([0, 1], [0, 1, 2])
    with pytest.raises(ValueError, match="integer class indices"):
        metrics.class_accuracy(np.array([0.0, 1.0]), np.array([0, 1]))


def test_intra_fid_groups_by_label_and_is_closed_form_for_a_shifted_class():
    rng = np.random.default_rng(0)
    real = rng.normal(size=(60, 4))
    real_labels = np.arange(60) % 2
    order = rng.permutation(60)
    fake, fake_labels = real[order].copy(), real_labels[order]
    # Class 1 moved by d: same covariance, so its FID is |d|^2 = 5.
    fake[fake_labels == 1] += [1.0, 2.0, 0.0, 0.0]
    mean, per_class = metrics.intra_fid(real, real_labels, fake, fake_labels, num_classes=2)
    assert per_class == pytest.approx([0.0, 5.0], abs=1e-6)
    assert mean == pytest.approx(2.5, abs=1e-6)
    with pytest.raises(ValueError, match="class 2 has 0"):
        metrics.intra_fid(real, real_labels, fake, fake_labels, num_classes=3)
    with pytest.raises(ValueError, match="one label per feature vector"):
        metrics.intra_fid(real, real_labels[:10], fake, fake_labels, num_classes=2)


def _band_images(labels, seed=0) -> np.ndarray:
    """Images whose class y is a bright pair of rows 4 + 2y, 5 + 2y (plus noise)."""
    rng = np.random.default_rng(seed)
    pixels = np.full((len(labels), 28, 28, 1), -1.0, np.float32)
    for index, label in enumerate(labels):
        pixels[index, 4 + 2 * label : 6 + 2 * label] = 1.0
    return pixels + rng.normal(0.0, 0.1, pixels.shape).astype(np.float32)


def _band_classifier() -> keras.Model:
    """A hand-set 10-class classifier of band images: feature k is the mean of band k, the
    logits are the features, so it is right on every band image."""
    inputs = keras.Input((28, 28, 1), name="images")
    bands = keras.layers.Dense(10, use_bias=False, name="features")
    head = keras.layers.Dense(10, name="logits")
    model = keras.Model(inputs, head(bands(keras.layers.Flatten()(inputs))))
    kernel = np.zeros((28, 28, 10), np.float32)
    for k in range(10):
        kernel[4 + 2 * k : 6 + 2 * k, :, k] = 1.0 / 56
    bands.set_weights([kernel.reshape(784, 10)])
    head.set_weights([np.eye(10, dtype=np.float32), np.zeros(10, np.float32)])
    return model


def _labeled_split(count, seed):
    labels = np.random.default_rng(seed).permutation(np.arange(count) % 10).astype(np.int64)
    return _band_images(labels, seed), labels


def test_a_generator_of_real_images_of_the_asked_class_scores_perfectly():
    extractor = keras_features(_band_classifier())
    pixels, labels = _labeled_split(200, seed=1)
    reference = evaluation.real_reference(
        tf.data.Dataset.from_tensor_slices({"x": pixels, "label": labels}), extractor,
        num_samples=200)
    np.testing.assert_array_equal(reference.labels, labels)
    options = dict(latent_shape=(8,), reference=reference, extractor=extractor, num_samples=200,
                   batch_size=64, kid_subsets=2, kid_subset_size=50, is_splits=2, num_classes=10)
    right = evaluation.evaluate_generator(evaluation.class_replay_sampler(pixels, labels),
                                          **options)
    assert right["class_accuracy"] == 1.0
    assert right["intra_fid"] == pytest.approx(0.0, abs=1e-4)
    assert len(right["intra_fid_per_class"]) == 10 and right["fid"] == pytest.approx(0.0, abs=1e-4)
    assert set(right) <= set(tags.FEATURE_METRICS)  # each key gets its features named
    shifted = evaluation.class_replay_sampler(pixels, labels)
    wrong = evaluation.evaluate_generator(lambda noise, wanted: shifted(noise, (wanted + 1) % 10),
                                         **options)
    assert wrong["class_accuracy"] == 0.0
    assert wrong["intra_fid"] > 1.0 and min(wrong["intra_fid_per_class"]) > 1.0
    # The same images, so the unconditional FID cannot tell.
    assert wrong["fid"] == pytest.approx(0.0, abs=1e-4)
    unlabeled = evaluation.real_reference(tf.data.Dataset.from_tensor_slices(pixels), extractor,
                                         num_samples=200)
    with pytest.raises(ValueError, match="true labels"):
        evaluation.evaluate_generator(shifted, **{**options, "reference": unlabeled})


def test_class_replay_runs_out_loudly():
    replay = evaluation.class_replay_sampler(np.zeros((3, 2, 2, 1), np.float32),
                                             np.array([0, 1, 0]))
    assert replay(None, tf.constant([0, 0, 1])).shape == (3, 2, 2, 1)
    with pytest.raises(ValueError, match="only 1 images of class 1"):
        replay(None, tf.constant([1]))


# A conditional run: sample, eval, export ---------------------------------------------------

@pytest.fixture(scope="module")
def conditional_run(tmp_path_factory):
    """An acgan run (the label enters through a Dense layer, so fresh weights already draw
    different images per class) with an EMA generator."""
    return write_run(tmp_path_factory.mktemp("conditional") / "run", setup="acgan")


def _generated(run, noise, labels):
    outputs = run.models["generator_ema"]([noise, tf.constant(labels, tf.int32)], training=False)
    return images.to_uint8(outputs.numpy()).astype(int)


def test_sample_with_a_class_name_draws_that_class(conditional_run, tmp_path):
    config = dataclasses.replace(conditional_run.config, mode="sample", label="sneaker", seed=5,
                                 num_samples=4, output=str(tmp_path / "s.npy"))
    assert sample_mode.sample(config).count == 4
    drawn = np.load(tmp_path / "s.npy").astype(int)
    noise = draws.sample_noise(5, 4, (8,))
    assert np.abs(drawn - _generated(conditional_run, noise, [SNEAKER] * 4)).max() <= 1
    assert np.abs(drawn - _generated(conditional_run, noise, [0] * 4)).mean() > 1


def test_sample_without_a_label_writes_one_row_per_class(conditional_run, tmp_path):
    config = dataclasses.replace(conditional_run.config, mode="sample", num_samples=25,
                                 output=str(tmp_path / "g.npy"))
    assert sample_mode.sample(config).count == 20
    grid = np.load(tmp_path / "g.npy").astype(int).reshape(10, 2, 28, 28, 1)
    noise = draws.sample_noise(config.seed, 2, (8,))
    assert np.abs(grid[6] - _generated(conditional_run, noise, [6, 6])).max() <= 1
    sample_mode.sample(dataclasses.replace(config, output=str(tmp_path / "g.png")))
    assert matplotlib.image.imread(tmp_path / "g.png").shape[:2] == (10 * 28 + 11, 2 * 28 + 3)


def test_label_errors_come_before_any_sample(conditional_run, tmp_path):
    output = tmp_path / "s.png"
    config = dataclasses.replace(conditional_run.config, mode="sample", label="Sneakers",
                                 output=str(output))
    with pytest.raises(ConfigError, match="--label='Sneakers' .*'Sneaker'"):
        sample_mode.sample(config)
    unconditional = write_run(tmp_path / "dcgan", ema=False)
    with pytest.raises(ConfigError, match="unconditional; drop --label"):
        sample_mode.sample(dataclasses.replace(unconditional.config, mode="sample", label="7",
                                            output=str(output)))
    assert not output.exists()


@pytest.fixture(scope="module")
def band_data(tmp_path_factory):
    """A cached 'domain evaluator' (the band classifier) and band-image train/test splits in
    place of Fashion-MNIST, so `--mode=eval` runs in-process in a second."""
    cache_dir = tmp_path_factory.mktemp("evaluators")
    write_evaluator(_band_classifier(), str(cache_dir))
    splits = {"train": _labeled_split(400, seed=2), "test": _labeled_split(200, seed=3)}

    def load_split(name, *, split, **kwargs):
        pixels, labels = splits[split]
        return tf.data.Dataset.from_tensor_slices({"x": pixels, "label": labels})

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(registry, "load_split", load_split)
        yield str(cache_dir)


def test_eval_of_a_conditional_run_adds_class_accuracy_and_intra_fid(conditional_run, band_data):
    config = dataclasses.replace(conditional_run.config, mode="eval", eval_samples=100,
                                 evaluator_dir=band_data)
    results = eval_mode.evaluate(config)
    assert {"fid_domain", "kid_domain", "precision_domain", "coverage_domain", "class_accuracy_domain",
            "intra_fid_domain"} <= set(results)
    # Sample i has class i % 10 and noise row i of the evaluation noise; the band classifier
    # names the class of each.
    noise = tf.random.stateless_normal([100, config.latent_dim],
                                       seed=[config.seed, evaluation.EVAL_NOISE_SALT])
    labels = np.arange(100) % 10
    drawn = conditional_run.models["generator_ema"]([noise, tf.constant(labels, tf.int32)],
                                                    training=False)
    predicted = np.argmax(_band_classifier()(drawn).numpy(), axis=1)
    assert results["class_accuracy_domain"] == pytest.approx(np.mean(predicted == labels))
    assert len(results["intra_fid_per_class_domain"]) == 10
    assert results["intra_fid_domain"] == pytest.approx(np.mean(results["intra_fid_per_class_domain"]))
    assert results["intra_fid_domain"] > 1.0 and results["num_samples"] == 100


def test_real_vs_real_of_a_conditional_run_floors_the_class_metrics(conditional_run, band_data):
    config = dataclasses.replace(conditional_run.config, mode="eval", eval_samples=100,
                                 evaluator_dir=band_data, real_vs_real=True)
    results = eval_mode.evaluate(config)
    assert results["class_accuracy_domain"] == 1.0 and results["real_vs_real"] is True
    assert 0.0 < results["intra_fid_domain"] < 0.1


def test_too_few_eval_samples_for_the_classes_is_a_config_error(conditional_run, band_data):
    config = dataclasses.replace(conditional_run.config, mode="eval", eval_samples=12,
                                 evaluator_dir=band_data)
    with pytest.raises(ConfigError, match="--eval_samples=12 .*10 classes"):
        eval_mode.evaluate(config)


@pytest.fixture(scope="module")
def conditional_export(conditional_run):
    return export.export(dataclasses.replace(conditional_run.config, mode="export"))


def test_exported_signatures_take_labels(conditional_run, conditional_export, tmp_path):
    loaded = tf.saved_model.load(conditional_export.path)
    noise = tf.random.stateless_normal([6, 8], seed=[1, 2])
    labels = tf.constant([0, 7, 7, 9, 3, 1], tf.int32)
    served = loaded.signatures["serving_default"](noise=noise, labels=labels)["images"].numpy()
    assert served.dtype == np.uint8 and served.shape == (6, 28, 28, 1)
    assert np.abs(served.astype(int) - _generated(conditional_run, noise, labels)).max() <= 1
    seeded = loaded.signatures["seed"](seed=tf.constant(5, tf.int64), count=tf.constant(4),
                                       label=tf.constant(SNEAKER))["images"].numpy()
    config = dataclasses.replace(conditional_run.config, mode="sample", label="Sneaker", seed=5,
                                 num_samples=4, output=str(tmp_path / "s.npy"))
    sample_mode.sample(config)
    assert np.abs(np.load(tmp_path / "s.npy").astype(int) - seeded).max() <= 1
    metadata = json.loads(open(os.path.join(conditional_export.path, "export.json")).read())
    assert metadata["signatures"] == {"serving_default": ["noise", "labels"],
                                      "seed": ["seed", "count", "label"]}
    assert metadata["num_classes"] == 10 and metadata["class_names"][SNEAKER] == "Sneaker"


@pytest.mark.filterwarnings("ignore:.*tf.lite.Interpreter is deprecated:UserWarning")
def test_a_mixed_precision_conditional_run_converts_to_tflite(tmp_path):
    run = write_run(tmp_path / "bf16", setup="cgan", precision="mixed_bfloat16")
    result = export.export(dataclasses.replace(run.config, mode="export", export_format="tflite"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        interpreter = tf.lite.Interpreter(model_path=os.path.join(result.path, "model.tflite"))
    assert interpreter.get_signature_list() == {
        "serving_default": {"inputs": ["labels", "noise"], "outputs": ["images"]}}
    noise = tf.random.stateless_normal([5, 8], seed=[3, 4]).numpy()
    labels = np.array([0, 2, 4, 6, 8], np.int32)
    lite = interpreter.get_signature_runner("serving_default")(noise=noise, labels=labels)["images"]
    reference = tf.saved_model.load(result.path).signatures["serving_default"](
        noise=tf.constant(noise), labels=tf.constant(labels))["images"].numpy()
    assert lite.shape == reference.shape == (5, 28, 28, 1)
    difference = np.abs(lite.astype(int) - reference.astype(int))
    assert difference.max() <= TFLITE_TOLERANCE["none"]["max"]
    assert difference.mean() <= TFLITE_TOLERANCE["none"]["mean"]
