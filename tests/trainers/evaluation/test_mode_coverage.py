"""The mode metrics of stacked_fashion_mnist runs, with the synthetic-data evaluator (which
classifies its synthetic images without error) and stacked data made from those images: real
stacked data covers exactly the modes its labels hold, a collapsed sampler one."""

import math

import numpy as np
import pytest
import tensorflow as tf

from datasets import registry, stacked
from gan import mode_coverage as coverage
from tests.gan import synthetic_evaluator
from trainers.config.flags import Config, ConfigError
from trainers.evaluation import mode_coverage


@pytest.fixture(scope="module")
def evaluator_dir(tmp_path_factory):
    directory = str(tmp_path_factory.mktemp("evaluators"))
    loaded, _ = synthetic_evaluator.train_synthetic_evaluator(directory)
    assert loaded.record["test_accuracy"] == 1.0  # what makes the counts below exact
    return directory


@pytest.fixture
def synthetic_source(monkeypatch):
    """Fashion-MNIST's splits replaced by the synthetic ones, which stacked data then stacks."""
    load_split = registry.load_split

    def fake(name, **options):
        if name == "fashion_mnist":
            return synthetic_evaluator.dataset(options["split"])
        return load_split(name, **options)

    monkeypatch.setattr(registry, "load_split", fake)


def _evaluation(evaluator_dir, **flags):
    config = Config(dataset=stacked.NAME, evaluator_dir=evaluator_dir, **flags)
    return mode_coverage.for_run(config, config)


def test_real_stacked_data_covers_the_modes_of_its_labels(evaluator_dir, synthetic_source):
    """26,000 uniform triples cover all 1,000 modes (each is missed with probability e^-26);
    an evaluator without errors finds exactly those, and their histogram's KL."""
    results = _evaluation(evaluator_dir).real_vs_real()
    source = synthetic_evaluator.synthetic("train")[1]
    true = stacked.mode_index(source[stacked.triples("train", len(source))[:26_000]])
    assert results == {"modes_domain": 1000,
                       "modes_kl_domain": pytest.approx(coverage.coverage(true, 1000).kl, rel=1e-12)}
    # The KL of a finite uniform sample: about (1000 - 1) / (2 * 26000).
    assert results["modes_kl_domain"] == pytest.approx(999 / 52_000, rel=0.2)


def test_a_collapsed_sampler_covers_one_mode(evaluator_dir):
    images = synthetic_evaluator.synthetic("test", 3)[0]
    image = tf.constant(np.concatenate(images, axis=-1)[np.newaxis])
    evaluation = _evaluation(evaluator_dir, mode_samples=600)
    results = evaluation(lambda noise: tf.repeat(image, tf.shape(noise)[0], axis=0),
                         latent_shape=(8,))
    assert results == {"modes_domain": 1, "modes_kl_domain": pytest.approx(math.log(1000))}
    assert evaluation.sample_count() == {"mode_samples": 600}


def test_other_datasets_add_no_mode_metrics(evaluator_dir):
    config = Config(dataset="fashion_mnist", evaluator_dir=evaluator_dir)
    none = mode_coverage.for_run(config, config)
    assert (none(None, (1,)), none.real_vs_real(), none.sample_count()) == ({}, {}, {})


def test_a_missing_evaluator_says_which_to_train(tmp_path):
    with pytest.raises(ConfigError, match="classified channel by channel by the fashion_mnist "
                                          "evaluator.* --mode=train_evaluator --dataset=fashion_mnist"):
        _evaluation(str(tmp_path))
