import os
import shutil

import numpy as np
import pytest

from datasets import registry
from datasets.files import FileFault
from gan import evaluator, features
from tests.gan.synthetic_evaluator import SETTINGS, FakeRegistry, synthetic, train_synthetic_evaluator


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """The synthetic-data evaluator, trained once for this module, and its cache dir."""
    cache_dir = str(tmp_path_factory.mktemp("evaluators"))
    loaded, loads = train_synthetic_evaluator(cache_dir)
    return loaded, cache_dir, loads


def _load(cache_dir, **kwargs):
    return evaluator.load_or_train_evaluator(
        "fashion_mnist", resolution=kwargs.pop("resolution", None), data_dir=None,
        fashion_mnist_dir=None, cache_dir=cache_dir, settings=SETTINGS, **kwargs)


def test_classifier_layout_per_resolution():
    small = evaluator.build_classifier(input_shape=(28, 28, 1), num_classes=10, width=4,
                                       feature_dim=16)
    large = evaluator.build_classifier(input_shape=(64, 64, 3), num_classes=7, width=4,
                                       feature_dim=16)
    assert small.get_layer("conv2").output.shape[1:] == (7, 7, 16)
    assert large.get_layer("conv3").output.shape[1:] == (8, 8, 32)
    assert small.output.shape[1:] == (10,) and large.output.shape[1:] == (7,)
    assert small.get_layer("features").output.shape[1:] == (16,)


def test_classifier_weights_are_a_function_of_the_seed():
    def fingerprint(seed):
        return features.weights_checksum(evaluator.build_classifier(
            input_shape=(28, 28, 1), num_classes=10, width=4, seed=seed))

    assert fingerprint(1) == fingerprint(1)
    assert fingerprint(1) != fingerprint(2)


def test_missing_evaluator_names_the_mode_that_trains_it(tmp_path):
    with pytest.raises(evaluator.EvaluatorMissingError,
                       match="--mode=train_evaluator --dataset=fashion_mnist --resolution=32"):
        _load(str(tmp_path), resolution=32)
    assert not os.listdir(tmp_path)


def test_training_saves_the_evaluator_and_its_record(trained):
    loaded, cache_dir, loads = trained
    directory = os.path.join(cache_dir, "fashion_mnist-28")
    assert loaded.trained and loaded.directory == directory
    assert sorted(os.listdir(directory)) == ["evaluator.json", "evaluator.keras"]
    assert loads.loads == [("fashion_mnist", "train", None), ("fashion_mnist", "test", None)]
    record = loaded.record
    assert record["dataset"] == "fashion_mnist"
    assert (record["resolution"], record["num_classes"]) == (28, 10)
    assert record["settings"]["max_train_examples"] == 2000 and record["feature_dim"] == 16
    assert record["fingerprint"] == features.weights_checksum(loaded.model)
    assert loaded.extractor.record() == {"name": "domain", "checksum": record["fingerprint"],
                                         "network": f"domain evaluator {directory}"}
    assert record["test_accuracy"] > 0.9
    images, labels = synthetic("test")
    predicted = np.argmax(loaded.extractor.logits(images), axis=1)
    assert np.mean(predicted == labels) == pytest.approx(record["test_accuracy"], abs=1e-6)


def test_a_cached_evaluator_is_reused_without_training(trained, monkeypatch):
    loaded, cache_dir, _ = trained
    model_path = os.path.join(loaded.directory, evaluator.EVALUATOR_FILE)
    modified = os.stat(model_path).st_mtime_ns
    loads = FakeRegistry()
    monkeypatch.setattr(registry, "load_split", loads)
    again = _load(cache_dir, train_if_missing=True)
    assert not again.trained and loads.loads == []
    assert os.stat(model_path).st_mtime_ns == modified
    assert again.record == loaded.record
    assert features.weights_checksum(again.model) == loaded.record["fingerprint"]
    images = synthetic("test", 20)[0]
    np.testing.assert_allclose(again.extractor.features(images), loaded.extractor.features(images),
                               rtol=1e-6)


def test_cache_directories_and_datasets_without_evaluator(tmp_path):
    directory = evaluator.evaluator_dir("tfds:cifar10", resolution=32, cache_dir="/c")
    assert directory == "/c/tfds_cifar10-32"
    with pytest.raises(ValueError, match="has no domain evaluator: it needs labelled images, and its examples have shape \\(2,\\)"):
        evaluator.load_or_train_evaluator("ring8", resolution=None, data_dir=None,
                                          fashion_mnist_dir=None, cache_dir=str(tmp_path))


def test_a_damaged_record_names_itself_and_the_retraining_mode(trained, tmp_path):
    loaded, _, _ = trained
    copy = tmp_path / "fashion_mnist-28"
    copy.mkdir()
    for name in os.listdir(loaded.directory):
        shutil.copy(os.path.join(loaded.directory, name), copy / name)
    (copy / evaluator.RECORD_FILE).write_text('{"test_accuracy": 0.9')
    with pytest.raises(FileFault, match=rf"^{copy}/{evaluator.RECORD_FILE} is damaged \(.*\); it "
                                        r"holds the test accuracy .* Retrain it with "
                                        r"--mode=train_evaluator"):
        _load(str(tmp_path))


def test_stacked_images_get_the_fashion_mnist_evaluator_per_channel(trained):
    """No evaluator of its own is trained or cached: Fashion-MNIST's classifies each channel."""
    loaded, cache_dir, _ = trained
    per_channel = evaluator.load_or_train_evaluator(
        "stacked_fashion_mnist", resolution=None, data_dir=None, fashion_mnist_dir=None,
        cache_dir=cache_dir)
    assert sorted(os.listdir(cache_dir)) == ["fashion_mnist-28"]
    assert per_channel.directory == loaded.directory and not per_channel.trained
    assert per_channel.record["fingerprint"] == loaded.record["fingerprint"]
    assert per_channel.record["per_channel_of"] == "stacked_fashion_mnist"
    assert tuple(per_channel.model.inputs[0].shape[1:]) == (28, 28, 3)
    assert per_channel.extractor.record() == {
        "name": "domain", "checksum": loaded.record["fingerprint"],
        "network": f"domain evaluator {loaded.directory} per channel"}
    assert per_channel.extractor.num_classes == 1000
    assert per_channel.extractor.feature_dim == 3 * loaded.extractor.feature_dim
