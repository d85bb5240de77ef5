"""The distillation loss and its helpers against closed forms."""

import keras
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


def _one_batch_norm_model(mean, variance):
    images = keras.Input(shape=(2, 2, 2))
    normalised = keras.layers.BatchNormalization(name="bn")(images)
    logits = keras.layers.Dense(3, name="logits")(keras.layers.Flatten()(normalised))
    model = keras.Model(images, logits, name="teacher")
    bn = model.get_layer("bn")
    bn.moving_mean.assign(mean)
    bn.moving_variance.assign(variance)
    return model


def test_the_statistics_gap_is_the_norms_of_the_moment_differences():
    mean, variance = np.array([0.5, -1.0], np.float32), np.array([2.0, 0.25], np.float32)
    teacher = _one_batch_norm_model(mean, variance)
    images = np.random.default_rng(0).normal(size=(5, 2, 2, 2)).astype(np.float32)
    *features, logits = distillation.batch_statistics_model(teacher)(images, training=False)
    np.testing.assert_allclose(features[0].numpy(), images)  # the input of the only BN layer
    np.testing.assert_allclose(logits.numpy(), teacher(images, training=False).numpy(), rtol=1e-6)
    flat = images.reshape(-1, 2).astype(np.float64)
    expected = np.linalg.norm(flat.mean(0) - mean) + np.linalg.norm(flat.var(0) - variance)
    gap = distillation.batch_statistics_gap(features, distillation.batch_norm_layers(teacher))
    assert gap.numpy() == pytest.approx(expected, rel=1e-5)
    # Features distributed exactly as stored: no gap.
    matched = np.array([[[[m + s, m - s]]] for m, s in zip(mean, np.sqrt(variance))], np.float32)
    matched = np.transpose(matched, (3, 1, 2, 0))  # 2 examples, 1x1, the 2 channels
    assert distillation.batch_statistics_gap(
        [matched], [teacher.get_layer("bn")]).numpy() == pytest.approx(0.0, abs=1e-5)


def test_a_teacher_without_batch_norm_has_no_statistics_model():
    images = keras.Input(shape=(4,))
    model = keras.Model(images, keras.layers.Dense(3)(images), name="plain")
    with pytest.raises(ValueError, match="'plain' has no BatchNormalization layer"):
        distillation.batch_statistics_model(model)


def test_the_class_balance_gap_is_zero_for_a_uniform_mean_and_log_c_for_one_class():
    balanced = np.array([[5.0, 0.0, 0.0], [0.0, 5.0, 0.0], [0.0, 0.0, 5.0]], np.float32)
    assert distillation.class_balance_gap(balanced).numpy() == pytest.approx(0.0, abs=1e-6)
    one_class = np.array([[50.0, 0.0, 0.0]] * 4, np.float32)
    assert distillation.class_balance_gap(one_class).numpy() == pytest.approx(np.log(3), abs=1e-5)
    probabilities = _softmax(STUDENT.astype(np.float64)).mean(0)
    expected = np.log(3) + (probabilities * np.log(probabilities)).sum()
    assert distillation.class_balance_gap(STUDENT).numpy() == pytest.approx(expected, rel=1e-5)
