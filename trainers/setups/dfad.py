"""`--setup=dfad`: data-free adversarial distillation (Fang et al. 2019): a student learns a
teacher classifier from generated inputs only; no training image is read.

Models: "teacher", frozen and only called, and "student" (`--teacher`, `--student_width`:
`students`); and "generator", the `--arch` generator (`--latent_dim`, `--g_width`, ...), noise ->
images of the dataset's shape through tanh, in [-1, 1]: the range of Gantry's images, on which
the domain evaluator (and any `--teacher`) is trained.

Two phases per cycle, each with its own optimizer: "student", `--student_updates` updates at
`--student_lr` (`--student_lr_schedule`, `--student_clip_global_norm`; before these flags
existed, the `--d_*` flags, still taken with a notice), minimises the mean absolute difference
of the teacher's and the student's logits on a fresh generated batch
(`distillation.logit_discrepancy`); then "generator", `--g_updates` updates at `--g_lr`,
maximises it (minimises its negative): it looks for inputs on which the two still disagree.
Alone, that search wanders off the data: inputs the teacher has never seen teach the student
little about the test images. Two priors in the generator's loss hold it near the data the
teacher knows: `--statistics_weight` x the gap between its features' batch moments and the
statistics its batch-norm layers stored on real data (DeepInversion), and
`--class_balance_weight` x how far the teacher's mean prediction is from uniform (DAFL). Both
default to 1; 0 and 0 is Fang et al.'s pure DFAD.
Neither phase uses data, so the run's training examples are one placeholder that is never
drawn; only the test split is read, for the accuracies.

Evaluation (`--eval_every`, `--mode=eval`) and export are the student's (`students`): the
student's and the teacher's test accuracy and their agreement; the student as a SavedModel.
TensorBoard shows the generated inputs of a fixed noise batch every `--image_every` cycles
("inputs"). The generator only serves the student's training, so `--mode=sample` is refused
(see the grids).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Mapping

from trainers.config.flags import Config, ConfigError, Flag, declare
from trainers.setups import students
from trainers.setups.protocol import Built, LearningRate, Parts, Restored, Sampling
from trainers.setups.kinds import check_architecture_flags

if TYPE_CHECKING:
    import keras
    import tensorflow as tf

    from datasets.registry import DatasetInfo
    from trainers.engine.controller import PeriodicAction
    from trainers.engine.phases import Phase

declare(
    "dfad",
    Flag('statistics_weight', float, 1.0,
         help="dfad: weight of the teacher's batch-norm statistics prior in the generator's loss "
              "(DeepInversion: its inputs' feature moments pulled towards those the teacher stored "
              'on real data; 0, with --class_balance_weight=0: pure DFAD).'),
    Flag('class_balance_weight', float, 1.0,
         help="dfad: weight of the class-balance term in the generator's loss (log C minus the "
              "entropy of the teacher's mean prediction over the batch; 0: off)."),
)

NAME = "dfad"
PRESETS = {
    # Adam for both, 1e-3 for the student and the generator, 5 student updates per generator
    # update, batch 64. Fang et al. train the student with SGD at 0.1 (momentum 0.9, 256 images
    # per batch, for hours on a GPU); Adam at 1e-3, the domain evaluator's own rate, adapts its
    # step per weight and needs no large-step tuning for the few thousand cycles of a CPU run.
    NAME: dict(optimizer="adam", g_lr=1e-3, student_lr=1e-3, beta1=0.9, beta2=0.999,
               student_updates=5, batch_size=64),
}
PHASE_METRICS = ("discrepancy", "agreement")
# The generator's priors (module docstring): metric name -> the flag of its weight (0: off).
PRIORS = {"statistics": "statistics_weight", "class_balance": "class_balance_weight"}


def discrepancy_phases(config: Config, teacher_statistics: keras.Model | None = None
                       ) -> tuple[Phase, Phase]:
    """The student phase (k updates, minimising the discrepancy) and the generator phase
    (maximising it, plus the `--statistics_weight` and `--class_balance_weight` priors), both
    on generated inputs. `teacher_statistics` is `distillation.batch_statistics_model` of the
    teacher, needed only when `--statistics_weight` > 0."""
    import tensorflow as tf

    from gan import distillation
    from trainers.engine.phases import LossOutput, Phase

    def generated(models, inputs):
        return models["generator"](inputs.normal((config.latent_dim,)), training=True)

    def student_loss(models, inputs) -> LossOutput:
        images = tf.stop_gradient(generated(models, inputs))
        teacher = models["teacher"](images, training=False)
        student = models["student"](images, training=True)
        gap = inputs.mean(distillation.logit_discrepancy(teacher, student))
        return LossOutput(loss=gap, metrics={
            "discrepancy": gap, "agreement": inputs.mean(distillation.agreement(teacher, student))})

    def generator_loss(models, inputs) -> LossOutput:
        images = generated(models, inputs)
        priors = {}  # each prior that is on: its batch statistic, this replica's share
        if config.statistics_weight > 0:
            *features, teacher = teacher_statistics(images, training=False)
            priors["statistics"] = distillation.batch_statistics_gap(
                features, distillation.batch_norm_layers(models["teacher"]))
        else:
            teacher = models["teacher"](images, training=False)
        if config.class_balance_weight > 0:
            priors["class_balance"] = distillation.class_balance_gap(teacher)
        priors = {name: inputs.share(value) for name, value in priors.items()}
        gap = inputs.mean(distillation.logit_discrepancy(
            teacher, models["student"](images, training=True)))
        loss = -gap + sum(getattr(config, PRIORS[name]) * value for name, value in priors.items())
        return LossOutput(loss=loss, metrics={"discrepancy": gap, **priors})

    return (Phase(name="student", models=("student",), loss=student_loss, metrics=PHASE_METRICS,
                  repeats=config.student_updates, uses_data=False,
                  clip_norm=config.student_clip_global_norm),
            Phase(name="generator", models=("generator",), loss=generator_loss,
                  metrics=generator_metrics(config), repeats=config.g_updates, uses_data=False,
                  clip_norm=config.g_clip_global_norm))


def generator_metrics(config: Config) -> tuple[str, ...]:
    """The generator phase's logged terms: the discrepancy, and each prior that is on."""
    return ("discrepancy", *(name for name, flag in PRIORS.items() if getattr(config, flag) > 0))


def teacher_statistics(config: Config, teacher: keras.Model) -> keras.Model | None:
    """The teacher's batch-norm inputs and logits (`distillation.batch_statistics_model`) when
    `--statistics_weight` > 0, else None; a ConfigError when the teacher stores no statistics."""
    from gan import distillation
    if config.statistics_weight <= 0:
        return None
    try:
        return distillation.batch_statistics_model(teacher)
    except ValueError as error:
        raise ConfigError(f"--statistics_weight={config.statistics_weight!r} is invalid: the "
                          f"teacher ({config.teacher or 'the domain evaluator'}): {error} Use "
                          "--statistics_weight=0.") from None


class DataFreeDistillation(students.StudentSetup):
    """A student distilled from a frozen teacher on a generator's inputs (module docstring);
    evaluated and exported as every student (`students.StudentSetup`)."""

    presets = PRESETS
    # Its generator's rate, updates and width, and the --arch generator; no discriminator.
    flag_owners = ("student", NAME, "generator", "architecture")

    def check_flags(self, config: Config) -> None:
        if config.mode != "train":
            return
        if config.generator:
            raise ConfigError(f"--generator={config.generator!r} is invalid: --setup={NAME} builds "
                              "its generator from --arch; drop it.")
        students.check_student(config)
        check_architecture_flags(config)
        for flag in PRIORS.values():
            value = getattr(config, flag)
            if not value >= 0:  # NaN too
                raise ConfigError(f"--{flag}={value!r} is invalid: use a weight >= 0 (0: off).")

    def training_sets(self, config: Config, info: DatasetInfo) -> dict[str, int | None]:
        """None: the student learns on generated inputs, whatever --batch_size."""
        return {}

    def training_examples(self, config: Config) -> Callable[[], tf.data.Dataset]:
        """One placeholder example, repeated: no phase draws a batch, so nothing is read."""
        import tensorflow as tf
        return lambda: tf.data.Dataset.from_tensors({"x": tf.zeros([])}).repeat()

    def learning_rates(self, config: Config) -> Mapping[str, LearningRate]:
        return {**super().learning_rates(config),
                "generator": LearningRate(config.g_lr, config.g_lr_schedule)}

    def build(self, config: Config, info: DatasetInfo) -> Parts:
        from gan import architectures, distillation
        from trainers.setups.kinds import generator_options
        self.check_data(config, info)
        resolution, _, channels = info.shape
        arch = architectures.ARCHITECTURES[config.arch]
        models = {
            "student": distillation.student_classifier(
                input_shape=info.shape, num_classes=info.num_classes,
                width=config.student_width, seed=config.seed),
            "generator": arch.generator(
                resolution=resolution, channels=channels, latent_dim=config.latent_dim,
                width=config.g_width, name="generator",
                **generator_options(config, arch.generator_options)),
            "teacher": students.load_teacher(config, info)}  # in its saved dtype policy
        phases = discrepancy_phases(config, teacher_statistics(config, models["teacher"]))
        generator = models["generator"]
        return Parts(models=models, phases=phases, sampling=Sampling(
            latent_shape=(config.latent_dim,), model="generator",
            sample=lambda noise: generator(noise, training=False)))

    def summaries(self, config: Config, built: Built, info: DatasetInfo) -> list[PeriodicAction]:
        from trainers.outputs import actions
        from trainers.setups import draws
        from trainers.setups.kinds import IMAGE_SUMMARY_SAMPLES
        return [actions.sample_summaries(
            name="inputs", every=config.image_every, sample=built.sampling.sample,
            write=actions.image_grid_writer("inputs"),
            noise=draws.fixed_noise(config, built.sampling.latent_shape, IMAGE_SUMMARY_SAMPLES))]

    def sample(self, config: Config, restored: Restored) -> int:
        raise ConfigError(f"--mode=sample: {config.logdir!r} holds a --setup={NAME} run, whose "
                          "generator only makes the student's training inputs (TensorBoard's "
                          "\"inputs\" grids show them); use --mode=eval for the student's "
                          "accuracy or --mode=export for the student.")
