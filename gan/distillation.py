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
