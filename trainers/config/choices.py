"""The closed sets of flag values that code in several layers reads, the config layer's own
checks among them (`validation`): kept here, the lowest layer, so that each can import them.
Each owner's other choices live beside its declarations (e.g. `engine.flags.STRATEGIES`).

Pure Python: flags are checked before TensorFlow is imported.
"""

from __future__ import annotations

from trainers.config.flags import declared

CHECKPOINT_CHOICES = ("latest", "best")  # or a step number
# The penalties taken at interpolates between a real and a fake image (WGAN-GP and its one-sided
# form): what batch norm, class labels and differential privacy each refuse.
INTERPOLATING_PENALTIES = ("gradient_penalty", "one_sided_gradient_penalty")
LEARNING_RATE_SCHEDULES = ("constant", "linear", "cosine", "inverse_sqrt")
# The feature networks `--evaluator` names (any other value is a Keras model file, "custom").
NAMED_EVALUATORS = ("domain", "inception", "keras_inception_v3")
EXPORT_FORMATS = ("saved_model", "tflite", "tfjs")
QUANTIZATIONS = ("none", "float16", "dynamic_int8", "uint8")
QUANTIZATIONS_BY_FORMAT = {"saved_model": ("none",), "tflite": ("none", "float16", "dynamic_int8"),
                           "tfjs": ("none", "float16", "uint8")}


def learning_rate_schedule_flags() -> tuple[str, ...]:
    """Every declared flag that chooses a learning-rate schedule (--g_lr_schedule and the
    setups' own, such as --student_lr_schedule), in declaration order."""
    return tuple(flag.name for flag in declared().values()
                 if flag.choices == LEARNING_RATE_SCHEDULES)
