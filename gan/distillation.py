"""Knowledge distillation (Hinton et al. 2015): a student classifier learns from the hard labels
and from a teacher's softened class probabilities.

Per example, with logits s (student) and t (teacher), temperature T and weights w_hard, w_soft:

    loss = w_hard * CE(label, softmax(s)) + w_soft * T^2 * KL(softmax(t / T) || softmax(s / T))

The T^2 keeps the soft term's gradients on the scale of the hard term's as T changes (the soft
gradients shrink as 1/T^2). Pure functions of tensors, float32 throughout; the student is the
domain evaluator's network (`evaluator.build_classifier`) at a smaller width.
"""

from __future__ import annotations

import keras
import tensorflow as tf

from gan import evaluator

STUDENT_FEATURES_PER_WIDTH = 4  # the domain evaluator's ratio: width 32, 128 features


def soft_target_divergence(teacher_logits, student_logits, temperature: float) -> tf.Tensor:
    """Per-example KL(softmax(t / T) || softmax(s / T)) * T^2, [N]."""
    teacher = tf.cast(teacher_logits, tf.float32) / temperature
    student = tf.cast(student_logits, tf.float32) / temperature
    targets = tf.nn.softmax(teacher)
    kl = tf.reduce_sum(targets * (tf.nn.log_softmax(teacher) - tf.nn.log_softmax(student)), axis=-1)
    return kl * temperature ** 2


def logit_discrepancy(teacher_logits, student_logits) -> tf.Tensor:
    """Per-example mean absolute difference of the logits, mean_c |t_c - s_c|, [N]: the
    data-free adversarial distillation loss (Fang et al. 2019), which the student minimises and
    the generator of its inputs maximises. L1 rather than KL: its gradient does not vanish
    once the student nearly matches the teacher's probabilities, so the generator keeps finding
    inputs where they still differ."""
    difference = tf.cast(teacher_logits, tf.float32) - tf.cast(student_logits, tf.float32)
    return tf.reduce_mean(tf.abs(difference), axis=-1)


def hard_label_loss(labels, student_logits) -> tf.Tensor:
    """Per-example cross-entropy of the integer labels under softmax(student logits), [N]."""
    return tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=tf.cast(labels, tf.int32), logits=tf.cast(student_logits, tf.float32))


def distillation_loss(labels, student_logits, teacher_logits, *, temperature: float,
                      hard_weight, soft_weight) -> tf.Tensor:
    """Per-example w_hard * CE + w_soft * T^2 * KL (module docstring), [N]."""
    return (hard_weight * hard_label_loss(labels, student_logits)
            + soft_weight * soft_target_divergence(teacher_logits, student_logits, temperature))


def predictions(logits) -> tf.Tensor:
    """The predicted class of each row of logits, int32 [N]."""
    return tf.argmax(logits, axis=-1, output_type=tf.int32)


def agreement(first_logits, second_logits) -> tf.Tensor:
    """Per-example 1.0 where two classifiers predict the same class, else 0.0, [N]."""
    return tf.cast(tf.equal(predictions(first_logits), predictions(second_logits)), tf.float32)


def correct(labels, logits) -> tf.Tensor:
    """Per-example 1.0 where the predicted class is the label, else 0.0, [N]."""
    return tf.cast(tf.equal(predictions(logits), tf.cast(labels, tf.int32)), tf.float32)


def student_classifier(*, input_shape: tuple[int, int, int], num_classes: int, width: int,
                       seed: int = 0) -> keras.Model:
    """The student: the domain evaluator's CNN with `width` base channels (and 4 x width
    features), images [N, H, W, C] in [-1, 1] -> logits [N, num_classes]."""
    return evaluator.build_classifier(input_shape=input_shape, num_classes=num_classes,
                                      width=width, feature_dim=STUDENT_FEATURES_PER_WIDTH * width,
                                      seed=seed, name="student")


def batch_norm_layers(model: keras.Model) -> list[keras.layers.BatchNormalization]:
    """The BatchNormalization layers of a functional or Sequential `model`, in call order."""
    return [layer for layer in model.layers if isinstance(layer, keras.layers.BatchNormalization)]


def batch_statistics_model(teacher: keras.Model) -> keras.Model:
    """images -> [the input of each of `teacher`'s batch-norm layers, ..., teacher logits].

    It shares the teacher's layers and weights (nothing is copied); `batch_statistics_gap`
    compares the features' batch moments with the statistics those layers stored while the
    teacher trained on real data. Raises ValueError when the teacher has no batch-norm layer.
    """
    layers = batch_norm_layers(teacher)
    if not layers:
        raise ValueError(f"{teacher.name!r} has no BatchNormalization layer: it stores no "
                         "statistics of its training data.")
    return keras.Model(teacher.input, [layer.input for layer in layers] + list(teacher.outputs),
                       name=f"{teacher.name}_statistics")


def batch_statistics_gap(features, layers) -> tf.Tensor:
    """sum over layers of ||batch mean - moving mean||_2 + ||batch variance - moving variance||_2,
    a scalar: DeepInversion's feature prior (Yin et al. 2020). A teacher's batch-norm layers
    remember the mean and variance of their inputs on its training data, so a generator that
    drives this to 0 makes inputs whose features are distributed like the real data's, at every
    depth, without reading an image. `features[i]` is the input of `layers[i]` (channels last);
    moments are over every axis but the channels."""
    gap = tf.constant(0.0)
    for feature, layer in zip(features, layers, strict=True):
        feature = tf.cast(feature, tf.float32)
        mean, variance = tf.nn.moments(feature, axes=list(range(len(feature.shape) - 1)))
        gap += tf.norm(mean - tf.cast(layer.moving_mean, tf.float32))
        gap += tf.norm(variance - tf.cast(layer.moving_variance, tf.float32))
    return gap


def class_balance_gap(logits) -> tf.Tensor:
    """log(C) - H(mean over the batch of softmax(logits)), a scalar >= 0: 0 when the batch's
    average prediction is uniform over the C classes. DAFL's information-entropy term (Chen et
    al. 2019): a generator that minimises it spreads its inputs over every class instead of
    the few where a student is easiest to fool."""
    probabilities = tf.reduce_mean(tf.nn.softmax(tf.cast(logits, tf.float32)), axis=0)
    entropy = -tf.reduce_sum(probabilities * tf.math.log(probabilities + 1e-12))
    return tf.math.log(tf.cast(tf.shape(probabilities)[0], tf.float32)) - entropy
