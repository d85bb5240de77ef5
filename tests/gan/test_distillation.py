"""The distillation loss and its helpers against closed forms."""

import numpy as np
import pytest
import tensorflow as tf

from gan import distillation

STUDENT = np.array([[2.0, 0.0, -1.0], [0.5, 0.5, 3.0]], np.float32)
TEACHER = np.array([[1.0, 3.0, 0.0], [0.0, 0.0, 4.0]], np.float32)
LABELS = np.array([0, 2])


def _softmax(logits):
    exp = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return exp / exp.sum(axis=-1, keepdims=True)


def test_the_loss_is_weighted_cross_entropy_plus_t_squared_kl():
    temperature, hard, soft = 2.0, 0.3, 0.7
    student, teacher = STUDENT.astype(np.float64), TEACHER.astype(np.float64)
    cross_entropy = -np.log(_softmax(student)[np.arange(2), LABELS])
    p, q = _softmax(teacher / temperature), _softmax(student / temperature)
    kl = (p * np.log(p / q)).sum(axis=-1) * temperature ** 2
    loss = distillation.distillation_loss(LABELS, STUDENT, TEACHER, temperature=temperature,
                                          hard_weight=hard, soft_weight=soft)
    np.testing.assert_allclose(loss.numpy(), hard * cross_entropy + soft * kl, rtol=1e-5)
    np.testing.assert_allclose(distillation.hard_label_loss(LABELS, STUDENT).numpy(),
                               cross_entropy, rtol=1e-5)
    # Equal logits: no divergence at any temperature.
    assert distillation.soft_target_divergence(TEACHER, TEACHER, 5.0).numpy() == pytest.approx([0, 0], abs=1e-6)


def test_weights_may_be_variables():
    weight = tf.Variable(0.0)
    loss = distillation.distillation_loss(LABELS, STUDENT, TEACHER, temperature=1.0,
                                          hard_weight=weight, soft_weight=1.0)
    np.testing.assert_allclose(loss.numpy(), distillation.soft_target_divergence(
        TEACHER, STUDENT, 1.0).numpy(), rtol=1e-6)


def test_accuracy_and_agreement():
    # student predicts [0, 2], teacher [1, 2]
    np.testing.assert_array_equal(distillation.correct(LABELS, STUDENT).numpy(), [1.0, 1.0])
    np.testing.assert_array_equal(distillation.correct(LABELS, TEACHER).numpy(), [0.0, 1.0])
    np.testing.assert_array_equal(distillation.agreement(STUDENT, TEACHER).numpy(), [0.0, 1.0])


def test_the_student_is_the_evaluator_network_at_its_width():
    student = distillation.student_classifier(input_shape=(28, 28, 1), num_classes=10, width=4)
    assert student.name == "student" and tuple(student.outputs[0].shape) == (None, 10)
    assert student.get_layer("features").units == 16


def test_the_discrepancy_is_the_mean_absolute_logit_difference():
    teacher = np.array([[2.0, -1.0, 0.5], [0.0, 0.0, 0.0]], np.float32)
    student = np.array([[1.0, 1.0, 0.5], [-3.0, 0.0, 3.0]], np.float32)
    # (|1| + |-2| + 0) / 3 and (3 + 0 + 3) / 3.
    np.testing.assert_allclose(distillation.logit_discrepancy(teacher, student).numpy(), [1.0, 2.0])
