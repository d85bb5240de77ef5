"""`--setup=distill`: knowledge distillation of a trained classifier into a smaller one.

Models: "teacher", a trained Keras classifier (`--teacher=PATH`, a .keras file; default: the
domain evaluator of `--dataset`, which `--mode=train_evaluator` trains), frozen and only called;
and "student", the domain evaluator's CNN at `--student_width` (`gan.distillation`).

One phase, "student" (its own optimizer, with `--d_lr`, `--d_lr_schedule` and
`--d_clip_global_norm`), on labelled training images: per example
w_hard x CE(label, student) + w_soft x T^2 x KL(softmax(teacher / T) || softmax(student / T)),
T = `--temperature`. The weights are the state variables "hard" and "soft" (checkpointed; a
Keras callback may assign them between fit steps without retracing). Each holds its weight,
`--hard_weight` / `--soft_weight`; with `--weight_ramp_cycles=N` the step moves each weight
linearly from its `--*_weight_start` at cycle 0 to the variable's value at cycle N
(`schedules.ramped_weight`), so after the ramp the variable is the weight again.

The teacher's weights are checkpointed with the run: a resumed, evaluated or exported run uses
the teacher it started with, even if the cached evaluator was retrained since; its file (or the
cached evaluator) is still read to rebuild its architecture. `--mode=eval` reports the student's
and the teacher's accuracy on the first `--eval_samples` test images and how often they agree;
`--eval_every` keeps the best checkpoint by the student's accuracy; `--mode=export` writes the
student (`serving_default`: images -> logits and probabilities; TFLite through the export mode).
A distillation run draws nothing, so `--mode=sample` is refused.

TensorFlow and `gan/` are imported inside the hooks (see `protocol`).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Mapping

from trainers.config.fields import Config, ConfigError
from trainers.config.flags import FILE, Flag, declare
from trainers.setups.protocol import (Built, Export, LearningRate, Parts, Restored, Scorer,
                                       Setup, refuse_unused_flags)

if TYPE_CHECKING:
    import keras
    import numpy as np
    import tensorflow as tf

    from datasets.registry import DatasetInfo
    from trainers.engine.phases import Phase

# The student and its teacher, also dfad's.
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
)
declare(
    "distill",
    Flag('temperature', float, 4.0,
         help='distill: softmax temperature T of the soft targets (the soft loss is multiplied by '
              'T^2).'),
    Flag('hard_weight', float, 0.5,
         help="distill: weight of the cross-entropy with the labels (the ramp's end with "
              '--weight_ramp_cycles).'),
    Flag('soft_weight', float, 0.5,
         help="distill: weight of T^2 x KL(teacher || student) on softened outputs (the ramp's end "
              'with --weight_ramp_cycles).'),
    Flag('hard_weight_start', float, None,
         help='distill: the hard weight at cycle 0, ramped linearly to --hard_weight over '
              '--weight_ramp_cycles cycles (unset: --hard_weight throughout).'),
    Flag('soft_weight_start', float, None,
         help='distill: the soft weight at cycle 0, ramped linearly to --soft_weight over '
              '--weight_ramp_cycles cycles (unset: --soft_weight throughout).'),
    Flag('weight_ramp_cycles', int, 0,
         help='distill: cycles over which the loss weights ramp from their _start values (0: no '
              'ramp).',
         renamed_from=('weight_ramp_steps',)),
)

NAME = "distill"
PRESETS = {
    # Adam 1e-3 (the domain evaluator's rate), batch 64. The G/D fields are unused.
    NAME: dict(loss="non_saturating", optimizer="adam", g_lr=1e-3, d_lr=1e-3, beta1=0.9,
                 beta2=0.999, d_updates=1, batch_size=64),
}
MIN_TEMPERATURE, MAX_TEMPERATURE = 0.01, 1000.0
METRICS = ("student_accuracy", "teacher_accuracy", "agreement")
PHASE_METRICS = ("cross_entropy", "distillation", "accuracy", "agreement", "hard_weight",
                 "soft_weight")
# GAN flags a distillation run does not read, with the value they must keep and why.
_NO_GENERATOR = "a distillation run has no generator"
_STUDENT = "the student's network is --student_width's CNN"
FIXED_FLAGS = {
    "loss": ("non_saturating", "the loss is the distillation loss"),
    "g_lr": (1e-3, _NO_GENERATOR + "; the student's rate is --d_lr"),
    "g_updates": (1, _NO_GENERATOR),
    "d_updates": (1, "the student makes one update per cycle"),
    "g_lr_schedule": ("constant", _NO_GENERATOR + "; the student's is --d_lr_schedule"),
    "g_clip_global_norm": (0.0, _NO_GENERATOR + "; the student's is --d_clip_global_norm"),
    "latent_dim": (100, _NO_GENERATOR),
    "g_width": (64, _NO_GENERATOR),
    "d_width": (64, _STUDENT),
    "arch": ("dcgan", _STUDENT),
    "g_extra_blocks": (0, _NO_GENERATOR),
    "g_upsample": ("transposed", _NO_GENERATOR),
    "d_extra_blocks": (0, _STUDENT),
    "d_dropout": (0.0, _STUDENT),
    "d_normalization": ("none", _STUDENT),
    "d_spectral_norm": (False, _STUDENT),
    "penalty": ("none", "the student has no discriminator penalty"),
    "penalty_weight": (0.0, "the student has no discriminator penalty"),
    "penalty_every": (1, "the student has no discriminator penalty"),
    "penalty_ramp_cycles": (0, "its loss weights ramp with --weight_ramp_cycles"),
    "clip_value": (0.0, "the student is not weight-clipped"),
    "update_order": ("alternating", "it has one phase"),
    "ema_halflife_kimg": (0.0, "it keeps no EMA model"),
    "diffaugment": ("", "the student sees unaugmented images"),
    "consistency_weight": (0.0, "it has no consistency regularization"),
    "topk": (1.0, _NO_GENERATOR),
    "topk_decay_cycles": (0, _NO_GENERATOR),
    "pack": (1, "the student classifies one image at a time"),
    "evaluator": ("domain", "it is scored by accuracy; the teacher is --teacher"),
}


def check_student(config: Config) -> None:
    """Refuses a --student_width or --teacher no student or teacher can be built from."""
    if config.student_width < 1:
        raise ConfigError(f"--student_width={config.student_width!r} is invalid: use a "
                          "positive width, e.g. 8.")
    if config.teacher and not (config.teacher.endswith(".keras") and os.path.isfile(config.teacher)):
        raise ConfigError(f"--teacher={config.teacher!r} is invalid: give an existing .keras "
                          "file (model.save), or leave it empty for the domain evaluator.")


def check_weights(config: Config) -> None:
    """Refuses loss weights and temperatures the distillation loss cannot use."""
    if not MIN_TEMPERATURE <= config.temperature <= MAX_TEMPERATURE:
        raise ConfigError(f"--temperature={config.temperature!r} is invalid: use a temperature in "
                          f"[{MIN_TEMPERATURE}, {MAX_TEMPERATURE:g}], e.g. 4 (1: the teacher's own "
                          "probabilities); logits / T and T^2 must stay finite in float32.")
    for flag in ("hard_weight", "soft_weight", "hard_weight_start", "soft_weight_start"):
        value = getattr(config, flag)
        if value is not None and value < 0:
            raise ConfigError(f"--{flag}={value!r} is invalid: use 0 (off) or a positive weight.")
    if config.hard_weight == 0 and config.soft_weight == 0:
        raise ConfigError("--hard_weight=0.0 and --soft_weight=0.0: the student would learn "
                          "nothing; give one of them a positive weight.")
    starts = [f"--{flag}" for flag in ("hard_weight_start", "soft_weight_start")
              if getattr(config, flag) is not None]
    if config.weight_ramp_cycles < 0:
        raise ConfigError(f"--weight_ramp_cycles={config.weight_ramp_cycles!r} is invalid: use 0 "
                          "(no ramp) or a number of cycles.")
    if starts and not config.weight_ramp_cycles:
        raise ConfigError(f"{' and '.join(starts)}: the start of a ramp needs --weight_ramp_cycles "
                          "> 0 (its length in cycles); give it, or drop the start.")
    if config.weight_ramp_cycles and not starts:
        raise ConfigError(
            f"--weight_ramp_cycles={config.weight_ramp_cycles!r} ramps nothing: give "
            "--hard_weight_start and/or --soft_weight_start (the weights at cycle 0), or use 0.")


def loss_weights(config: Config) -> dict[str, tf.Variable]:
    """The "hard" and "soft" weight variables, holding --hard_weight and --soft_weight."""
    import tensorflow as tf
    return {kind: tf.Variable(float(getattr(config, f"{kind}_weight")), trainable=False,
                              name=f"{kind}_weight") for kind in ("hard", "soft")}


def student_phase(config: Config, weights: Mapping[str, tf.Variable]) -> Phase:
    """The one phase: the student against the labels and the frozen teacher's soft targets."""
    import tensorflow as tf

    from gan import distillation
    from trainers.engine import schedules
    from trainers.engine.phases import LossOutput, Phase

    def weight_now(kind: str, inputs) -> tf.Tensor:
        start = getattr(config, f"{kind}_weight_start")
        if start is None:
            return tf.convert_to_tensor(weights[kind])
        return schedules.ramped_weight(inputs.cycle, start, weights[kind], config.weight_ramp_cycles)

    def loss(models, inputs) -> LossOutput:
        images, labels = inputs.real["x"], inputs.real["label"]
        teacher = models["teacher"](images, training=False)
        student = models["student"](images, training=True)
        hard, soft = weight_now("hard", inputs), weight_now("soft", inputs)
        cross_entropy = distillation.hard_label_loss(labels, student)
        divergence = distillation.soft_target_divergence(teacher, student, config.temperature)
        ones = tf.ones_like(cross_entropy)
        return LossOutput(
            loss=inputs.mean(hard * cross_entropy + soft * divergence),
            metrics={"cross_entropy": inputs.mean(cross_entropy),
                     "distillation": inputs.mean(divergence),
                     "accuracy": inputs.mean(distillation.correct(labels, student)),
                     "agreement": inputs.mean(distillation.agreement(teacher, student)),
                     "hard_weight": inputs.mean(hard * ones), "soft_weight": inputs.mean(soft * ones)})

    return Phase(name="student", models=("student",), loss=loss, metrics=PHASE_METRICS,
                 clip_norm=config.d_clip_global_norm)


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
                channels=config.channels).extractor.model
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
    from trainers.setups.cyclegan import translate
    student, teacher = (translate(models[name], images) for name in ("student", "teacher"))
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


class Distillation(Setup):
    """A student classifier distilled from a frozen teacher (see the module docstring)."""

    presets = PRESETS
    flag_owners = ("student", NAME)
    metrics = METRICS

    def check_flags(self, config: Config) -> None:
        if config.mode != "train":
            return
        refuse_unused_flags(config, FIXED_FLAGS)
        check_student(config)
        check_weights(config)

    def check_data(self, config: Config, info: DatasetInfo, num_replicas: int = 1) -> None:
        if info.kind != "image" or not info.num_classes:
            what = "2-D points" if info.kind == "points" else "unlabelled images"
            raise ConfigError(f"--dataset={config.dataset!r} has {what}; --setup={config.setup} trains a "
                              "classifier on labelled images: use e.g. --dataset=fashion_mnist or "
                              "a folder with one sub-folder per class.")

    def learning_rates(self, config: Config) -> Mapping[str, LearningRate]:
        return {"student": LearningRate(config.d_lr, config.d_lr_schedule)}

    def build(self, config: Config, info: DatasetInfo) -> Parts:
        from gan import distillation
        self.check_data(config, info)
        weights = loss_weights(config)
        phases = (student_phase(config, weights),)
        models = {"student": distillation.student_classifier(
            input_shape=info.shape, num_classes=info.num_classes, width=config.student_width,
            seed=config.seed)}
        models["teacher"] = load_teacher(config, info)  # in its saved dtype policy
        return Parts(models=models, phases=phases, loss_weights=weights)

    def scorer(self, config: Config, built: Built, info: DatasetInfo) -> Scorer:
        images, labels = evaluation_examples(config, config)
        return Scorer(score=lambda: accuracies(built.models, images, labels),
                      selection=lambda results: -results["student_accuracy"])

    def sample(self, config: Config, restored: Restored) -> int:
        raise ConfigError(f"--mode=sample: {config.logdir!r} holds a --setup={restored.run.setup} run, a "
                          "classifier, which draws nothing; use --mode=eval for its accuracy or "
                          "--mode=export for the student.")

    def evaluate(self, config: Config, run: Config, restored: Restored | None) -> dict[str, Any]:
        if restored is None:
            raise ConfigError(f"--real_vs_real scores real images as generated ones; a --setup={run.setup} "
                              "run generates none: drop it.")
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
