"""The data kinds of the generator/discriminator setups: which kind a dataset gets, the metrics
they report, what each serves and what a conditional setup is told it lacks."""

import dataclasses

import numpy as np
import pytest
import tensorflow as tf

from datasets import registry as datasets
from tests.trainers.tiny import IMAGE_INFO
from trainers.setups import kinds
from trainers.setups.unconditional import UnconditionalGAN


def test_each_dataset_kind_gets_its_class_and_an_unknown_one_is_refused():
    assert type(kinds.get(IMAGE_INFO.kind)) is kinds.Images
    assert type(kinds.get(datasets.dataset_info("ring8").kind)) is kinds.Toy
    with pytest.raises(ValueError) as error:
        kinds.get("voxels")
    assert str(error.value) == "Data kind 'voxels' is unknown: use one of 'image', 'toy'."


def test_the_unconditional_setups_report_every_kinds_metrics_in_order():
    assert UnconditionalGAN.metrics == kinds.Images.metrics + kinds.TOY_METRICS == (
        "fid", "kid", "precision", "recall", "kid_std", "inception_score", "inception_score_std",
        "coverage", "class_kl", "modes_domain", "modes_kl_domain", "modes", "high_quality")


def test_images_are_served_as_uint8_and_a_toys_points_as_float32():
    generated = tf.constant([[[[-1.0]], [[1.0]]]])  # one 2x1 image
    served = kinds.get("image").served(generated)
    assert list(served) == ["images"] and served["images"].dtype == tf.uint8
    np.testing.assert_array_equal(served["images"].numpy().ravel(), [0, 255])
    points = kinds.get("toy").served(tf.constant([[0.5, -2.0]], tf.float16))
    assert list(points) == ["points"] and points["points"].dtype == tf.float32
    np.testing.assert_array_equal(points["points"].numpy(), [[0.5, -2.0]])


def test_only_labelled_images_have_nothing_instead_of_labelled_images():
    unlabelled = dataclasses.replace(IMAGE_INFO, num_classes=None)
    ring8 = datasets.dataset_info("ring8")
    assert [kinds.get(info.kind).without_labelled_images(info)
            for info in (IMAGE_INFO, unlabelled, ring8)] == [
        "", "images without class labels", "toy data (2-D points)"]
