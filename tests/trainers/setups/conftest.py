"""The setups' shared fixtures: a small trained teacher for `distill` and `dfad`."""

import pytest

from datasets import registry as datasets
from gan import evaluator
from tests.gan.synthetic_evaluator import write_evaluator


def split(name, count):
    """The first `count` Fashion-MNIST examples of split `name`."""
    return datasets.load_split("fashion_mnist", split=name, data_dir=None, fashion_mnist_dir=None,
                               resolution=None, seed=0).take(count)


@pytest.fixture(scope="session")
def teacher(tmp_path_factory):
    """A width-4 domain-evaluator CNN trained on 2,000 images: a .keras file, and the cached
    Fashion-MNIST domain evaluator of an evaluator directory."""
    root = tmp_path_factory.mktemp("teacher")
    model = evaluator.build_classifier(input_shape=(28, 28, 1), num_classes=10, width=4,
                                       feature_dim=16)
    evaluator.train_classifier(model, split("train", 2000), split("test", 500), settings=(
        evaluator.TrainSettings(epochs=1, batch_size=64, width=4, feature_dim=16)))
    model.save(root / "teacher.keras")
    write_evaluator(model, str(root / "evaluators"))
    return root
