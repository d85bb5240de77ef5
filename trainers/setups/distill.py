"""`--setup=distill`: knowledge distillation of a trained classifier into a smaller one.

Models: "teacher", a trained Keras classifier, frozen and only called, and "student", a smaller
CNN (`--teacher`, `--student_width`: `students`).

One phase, "student" (its own optimizer at `--student_lr` and `--student_lr_schedule`, clipped to
`--student_clip_global_norm`, `--student_updates` times per cycle; before these flags existed
the student read `--d_lr`, `--d_lr_schedule`, `--d_clip_global_norm` and `--d_updates`, which
it still takes, with a notice, as do runs recorded then), on labelled training images: per example
w_hard x CE(label, student) + w_soft x T^2 x KL(softmax(teacher / T) || softmax(student / T)),
T = `--temperature`. The weights are the state variables "hard" and "soft" (checkpointed; a
Keras callback may assign them between fit steps without retracing). Each holds its weight,
`--hard_weight` / `--soft_weight`; with `--weight_ramp_cycles=N` the step moves each weight
linearly from its `--*_weight_start` at cycle 0 to the variable's value at cycle N
(`schedules.ramped_weight`), so after the ramp the variable is the weight again.

The teacher's weights are checkpointed with the run: a resumed, evaluated or exported run uses
the teacher it started with, even if the cached evaluator was retrained since; its file (or the
cached evaluator) is still read to rebuild its architecture. Evaluation (`--mode=eval`,
`--eval_every`), export and the refusal of `--mode=sample` are the student's (`students`).

TensorFlow and `gan/` are imported inside the hooks (see `protocol`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping

from trainers.config.flags import Config, ConfigError, Flag, declare
from trainers.setups.protocol import Parts
from trainers.setups.students import StudentSetup, check_student, load_teacher

if TYPE_CHECKING:
    import tensorflow as tf

    from datasets.registry import DatasetInfo
    from trainers.engine.phases import Phase

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
    # Adam 1e-3 (the domain evaluator's rate), one update per cycle, batch 64.
    NAME: dict(optimizer="adam", student_lr=1e-3, beta1=0.9, beta2=0.999, student_updates=1,
               batch_size=64),
}
MIN_TEMPERATURE, MAX_TEMPERATURE = 0.01, 1000.0
PHASE_METRICS = ("cross_entropy", "distillation", "accuracy", "agreement", "hard_weight",
                 "soft_weight")


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
                 repeats=config.student_updates, clip_norm=config.student_clip_global_norm)


class Distillation(StudentSetup):
    """A student classifier distilled from a frozen teacher (see the module docstring)."""

    presets = PRESETS
    # Not --evaluator: it is scored by accuracy; its default teacher is the domain evaluator
    # cached in --evaluator_dir (a common flag, which --mode=train_evaluator writes).
    flag_owners = ("student", NAME)

    def check_flags(self, config: Config) -> None:
        if config.mode != "train":
            return
        check_student(config)
        check_weights(config)

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
