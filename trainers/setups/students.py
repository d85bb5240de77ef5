"""The student and its teacher: what every setup that trains a student classifier from a
frozen teacher shares (`--setup=distill` and `--setup=dfad`), so neither setup imports the other.

The teacher is a trained Keras classifier (`--teacher=PATH`, a .keras file; default: the domain
evaluator of `--dataset`, which `--mode=train_evaluator` trains), frozen and only called; the
student is the domain evaluator's CNN at `--student_width` (`gan.distillation`), trained with
its own optimizer at `--student_lr` (`--student_lr_schedule`). Both are checkpointed with the run: a
resumed, evaluated or exported run uses the teacher it started with. `StudentSetup` holds the
hooks that depend only on the student and the teacher:

- data: labelled images (a ConfigError for a toy or unlabelled images);
- evaluation: `--mode=eval` reports the student's and the teacher's accuracy on the first
  `--eval_samples` test images and how often they agree; `--eval_every` (its periodic
  evaluation) keeps the best checkpoint by the student's accuracy;
- export: the student (`serving_default`: images -> logits and probabilities; TFLite through
  the export mode);
- sample: refused, a classifier draws nothing.

A subclass sets its presets and flag owners and builds its phases (`build`). TensorFlow and
`gan/` are imported inside the hooks (see `protocol`).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Mapping

from trainers.config.choices import LEARNING_RATE_SCHEDULES
from trainers.config.flags import FILE, REQUIRED, Config, ConfigError, Flag, declare
from trainers.setups import inference, kinds
from trainers.setups.protocol import Export, LearningRate, PeriodicEvaluation, Restored, Setup

if TYPE_CHECKING:
    import keras
    import numpy as np

    from datasets.registry import DatasetInfo
    from trainers.setups.protocol import Built

# The student and its teacher. The student's rate, schedule, clipping and updates
# were the discriminator's flags' before it had its own (`Flag.takes_over`).
declare(
    "student",
    Flag('teacher', str, '',
         help='distill, dfad: the teacher, a .keras classifier of images in [-1, 1] to class '
              'logits; empty: the domain evaluator of --dataset (--mode=train_evaluator).',
         path=FILE, fixed_on_resume=True),
    Flag('student_width', int, 8,
         help="distill, dfad: base channel width of the student CNN (the domain evaluator's "
              'network, which has 32).',
         fixed_on_resume=True),
    Flag('student_lr', float, None,
         help="distill, dfad: the student's learning rate (preset default).",
         preset=True, neutral=REQUIRED, takes_over=('d_lr',)),
    Flag('student_lr_schedule', str, None,
         help="distill, dfad: the student's learning-rate schedule, as --g_lr_schedule's (preset "
              'default: constant).',
         choices=LEARNING_RATE_SCHEDULES, preset=True, neutral='constant',
         takes_over=('d_lr_schedule',)),
    Flag('student_clip_global_norm', float, 0.0,
         help="distill, dfad: clip the student's gradient to this global norm (0: off).",
         takes_over=('d_clip_global_norm',)),
    Flag('student_updates', int, None,
         help='distill, dfad: student updates per cycle (preset default: 1 for distill, 5 for '
              'dfad).',
         fixed_on_resume=True, preset=True, neutral=1, takes_over=('d_updates',)),
)
METRICS = ("student_accuracy", "teacher_accuracy", "agreement")


def check_student(config: Config) -> None:
    """Refuses a --student_width or --teacher no student or teacher can be built from."""
    if config.student_width < 1:
        raise ConfigError(f"--student_width={config.student_width!r} is invalid: use a "
                          "positive width, e.g. 8.")
    if config.teacher and not (config.teacher.endswith(".keras") and os.path.isfile(config.teacher)):
        raise ConfigError(f"--teacher={config.teacher!r} is invalid: give an existing .keras "
                          "file (model.save), or leave it empty for the domain evaluator.")


def load_teacher(config: Config, info: DatasetInfo) -> keras.Model:
    """The teacher of `config` (a ConfigError naming --teacher when it cannot be one), frozen.
    Call inside the strategy's scope."""
    import keras

    from gan import evaluator
    flag = f"--teacher={config.teacher!r}"
    try:
        if config.teacher:
            teacher = keras.models.load_model(config.teacher, compile=False)
        else:
            teacher = evaluator.load_or_train_evaluator(
                config.dataset, resolution=config.resolution, data_dir=config.data_dir,
                fashion_mnist_dir=config.fashion_mnist_dir, cache_dir=config.evaluator_dir,
                channels=config.channels).model
    except Exception as error:  # noqa: BLE001  Keras raises several types for a bad file
        first_line = (str(error).strip().splitlines() or [""])[0]
        what = "a .keras classifier" if config.teacher else "the domain evaluator of --dataset"
        raise ConfigError(f"{flag} names {what}, which cannot be loaded: {first_line}") from None
    shapes = ([tuple(tensor.shape[1:]) for tensor in teacher.inputs],
              [tuple(tensor.shape[1:]) for tensor in teacher.outputs])
    if shapes != ([tuple(info.shape)], [(info.num_classes,)]):
        raise ConfigError(
            f"{flag}: the teacher maps inputs of shape {shapes[0]} to outputs of shape "
            f"{shapes[1]}; this run needs one image input {tuple(info.shape)} and one output of "
            f"{info.num_classes} class logits ({config.dataset}).")
    teacher.trainable = False
    return teacher


def evaluation_examples(config: Config, run: Config) -> tuple[np.ndarray, np.ndarray]:
    """The first --eval_samples test images of `run`'s dataset and their labels."""
    import numpy as np

    from datasets import registry
    split = registry.load_split(run.dataset, split="test", data_dir=config.data_dir,
                                fashion_mnist_dir=config.fashion_mnist_dir,
                                resolution=run.resolution, seed=config.seed, channels=run.channels)
    batches = list(split.take(config.eval_samples).batch(1000).as_numpy_iterator())
    return (np.concatenate([batch["x"] for batch in batches]),
            np.concatenate([batch["label"] for batch in batches]))


def accuracies(models: Mapping[str, keras.Model], images: np.ndarray,
               labels: np.ndarray) -> dict[str, Any]:
    """The student's and the teacher's accuracy on `images` and the fraction of images on
    which they predict the same class."""
    from gan import distillation
    student, teacher = (inference.predict(models[name], images) for name in ("student", "teacher"))
    return {"student_accuracy": float(distillation.correct(labels, student).numpy().mean()),
            "teacher_accuracy": float(distillation.correct(labels, teacher).numpy().mean()),
            "agreement": float(distillation.agreement(student, teacher).numpy().mean()),
            "num_samples": len(images)}


def student_archive(student: keras.Model, input_shape: tuple[int, ...]) -> keras.export.ExportArchive:
    """`serving_default`: `images` float32 [N, H, W, C] in [-1, 1] -> `logits` and
    `probabilities` float32 [N, num_classes]."""
    import keras
    import tensorflow as tf

    def serve(images):
        logits = tf.cast(student(images, training=False), tf.float32)
        return {"logits": logits, "probabilities": tf.nn.softmax(logits)}

    archive = keras.export.ExportArchive()
    archive.track(student)
    archive.add_endpoint("serving_default", serve, input_signature=[
        tf.TensorSpec([None, *input_shape], tf.float32, name="images")])
    return archive


class StudentSetup(Setup):
    """A student classifier trained from a frozen teacher: the hooks that depend only on the
    two (see the module docstring). Subclasses set `presets` and `flag_owners` and implement
    `check_flags` and `build`."""

    metrics = METRICS

    def check_data(self, config: Config, info: DatasetInfo, num_replicas: int = 1) -> None:
        instead = kinds.get(info.kind).without_labelled_images(info)
        if instead:
            raise ConfigError(f"--dataset={config.dataset!r} has {instead}; --setup={config.setup} "
                              "trains a classifier on labelled images: use e.g. "
                              "--dataset=fashion_mnist or a folder with one sub-folder per class.")

    def learning_rates(self, config: Config) -> Mapping[str, LearningRate]:
        return {"student": LearningRate(config.student_lr, config.student_lr_schedule)}

    def periodic_evaluation(self, config: Config, built: Built,
                            info: DatasetInfo) -> PeriodicEvaluation:
        images, labels = evaluation_examples(config, config)
        return PeriodicEvaluation(evaluate=lambda: accuracies(built.models, images, labels),
                                  selection=lambda results: -results["student_accuracy"])

    def sample(self, config: Config, restored: Restored) -> int:
        raise ConfigError(f"--mode=sample: {config.logdir!r} holds a --setup={restored.run.setup} run, a "
                          "classifier, which draws nothing; use --mode=eval for its accuracy or "
                          "--mode=export for the student.")

    def evaluate(self, config: Config, run: Config, restored: Restored | None) -> dict[str, Any]:
        if restored is None:
            raise ConfigError(f"--real_vs_real evaluates real images as generated ones; a "
                              f"--setup={run.setup} run generates none: drop it.")
        return accuracies(restored.built.models, *evaluation_examples(config, run))

    def export_archive(self, config: Config, restored: Restored) -> Export:
        info = restored.info
        return Export(
            archive=student_archive(restored.built.models["student"], info.shape), model="student",
            metadata={"setup": restored.run.setup, "input_shape": list(info.shape),
                      "num_classes": info.num_classes,
                      "class_names": list(info.class_names) if info.class_names else None,
                      "inputs": "images float32 [N, H, W, C] in [-1, 1]",
                      "signatures": {"serving_default": ["images"]}})
