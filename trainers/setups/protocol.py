"""The Setup protocol: everything a `--setup` setup provides, so that every mode works through it.

A setup is one module under `trainers/setups/` with one `Setup` subclass, registered by one line
in `registry.py`; no mode knows its name. What several setups share lives in a common module
beside them (`students`, `kinds`, `adversarial`, `building`, `draws`, `inference`), never in
another setup's module. The modes call its hooks:

- train: `check_flags` (before TensorFlow is imported), `dataset_info`, `check_data`,
  `training_sets`, `training_examples`, `build`, `summaries`, and `periodic_evaluation` with
  `--eval_every`;
- sample, eval, export: the run is rebuilt from its `config.json` and restored
  (`modes.restore`), then `sample`, `evaluate` or `export_archive` decide what that means for
  this setup (noise to images, a toy's points, translations...) or refuse with a `ConfigError`.

Every mode, the Keras path and the API build a run with `building.build_run`, never `build`
alone: `build` returns the setup's `Parts` (models, phases, loss weights, sampling), and
`build_run` enters the strategy scope and the dtype policy around it and adds what every setup
builds alike: the optimizers (from `learning_rates`), their rate scales and the time-budget
progress (`Built`). Setups with generator and discriminator roles start from
`adversarial_setup.AdversarialSetup`, which writes down their network hooks.

A setup declares its own flags in its module (`trainers.config.flags.declare`) and names, in
`Setup.flag_owners`, their owner and every other owner whose flags it reads beyond the common
ones (their flags modules, e.g. `adversarial_flags`); its presets are mappings of the preset flags it reads to values.

Words (BUILD.md, "Flags and words"): an *update* is one optimizer step of one model; a *cycle*
is one round of a setup's phases (k discriminator updates, then the generator's); a *step* is
the number of cycles done; a *phase* is one kind of update in a cycle; the *discriminator*
scores samples (a "critic" under a Wasserstein loss); to *evaluate* is to compute a run's metrics:
once with `--mode=eval` (`Setup.evaluate`), or every `--eval_every` cycles during training (its
*periodic evaluation*, `Setup.periodic_evaluation`, which also ranks checkpoints); the
*evaluator* is the network whose features image metrics are computed on; a *toy* is a dataset
of 2-D points (ring8, grid25), a data *kind* beside images (`DatasetInfo.kind`).

Setup modules import TensorFlow, Keras and `gan/` inside the hooks that use them, never at
import time: `run.py` resolves presets and checks flags through the registry in a second, and a
bad flag is reported before TensorFlow (several seconds) is imported.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Callable, Mapping

from trainers.config.flags import Config, ConfigError

if TYPE_CHECKING:
    import keras
    import tensorflow as tf

    from datasets.registry import DatasetInfo
    from trainers.engine.controller import PeriodicAction
    from trainers.engine.phases import Phase

@dataclasses.dataclass(frozen=True)
class LearningRate:
    """One optimizer's rate: its base rate and schedule (`schedules.LEARNING_RATE_SCHEDULES`),
    as the flags of the model it trains give them (`Setup.learning_rates`)."""

    base: float
    schedule: str


@dataclasses.dataclass(frozen=True)
class Sampling:
    """How a setup that draws from noise samples: `sample(noise)` maps latent vectors
    [N, *latent_shape] to outputs with the model named `model` (the EMA generator when the run
    keeps one and `use_ema` is set)."""

    latent_shape: tuple[int, ...]
    sample: Callable[[tf.Tensor], tf.Tensor]
    model: str


@dataclasses.dataclass(frozen=True)
class Parts:
    """What `Setup.build` returns: what only the setup knows how to build.

    `models` are keyed by the names the phases use (and their checkpoint keys). `loss_weights`
    are variables the losses read inside the compiled step (callbacks may change them; they are
    checkpointed). `sampling` is None for a setup that draws nothing from noise.
    `train_time_progress` is the variable through which what decays over the run follows
    --train_time (None without it): a setup whose losses or after-update hooks read it creates
    it (`building.train_time_progress`) and returns it here; `build_run` creates it otherwise.
    """

    models: Mapping[str, keras.Model]
    phases: tuple[Phase, ...]
    loss_weights: Mapping[str, tf.Variable] = dataclasses.field(default_factory=dict)
    sampling: Sampling | None = None
    train_time_progress: tf.Variable | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class Built(Parts):
    """A built run: the setup's `Parts` with what `building.build_run` builds from them for
    every setup alike. This is what the engine trains and checkpoints and what the modes,
    the Keras path and the API read.

    `optimizers` and `learning_rate_scales` are keyed by optimizer name
    (`phases.phase_optimizer_names`), which are also their keys in the checkpoint.
    `train_time_progress` (the setup's or `build_run`'s) is also what a decaying rate follows.
    """

    optimizers: Mapping[str, keras.optimizers.Optimizer]
    learning_rate_scales: Mapping[str, tf.Variable]


@dataclasses.dataclass(frozen=True)
class Restored:
    """A run rebuilt from LOGDIR/config.json (`run`) with the weights of one checkpoint."""

    run: Config
    info: DatasetInfo
    built: Built
    checkpoint: str
    step: int


@dataclasses.dataclass(frozen=True)
class PeriodicEvaluation:
    """`--eval_every`: `evaluate()` returns the metrics of the weights as they are now (numbers,
    or lists for per-class values); `selection(results)` ranks them, lower is better, for the
    best checkpoint. `basis` names what the values depend on beyond the weights (the feature
    network, the sample count; JSON values): a best record measured on another basis does not
    rank against them, so a resume that changed it is refused."""

    evaluate: Callable[[], dict[str, Any]]
    selection: Callable[[dict[str, Any]], float]
    basis: Mapping[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Export:
    """What `--mode=export` writes: the archive (its endpoints), the name of the exported
    model, and the setup's part of export.json."""

    archive: keras.export.ExportArchive
    model: str
    metadata: dict[str, Any]


class Setup:
    """One family of `--setup` setups. Subclasses set the class attributes and override hooks.

    Attributes:
      presets: the `--setup` names this setup serves, each with its preset: the values of the
        preset flags (`Flag.preset`) it sets, checked by `flags.check_preset` when it registers
        (only flags it reads; every REQUIRED one of those).
      flag_owners: the owners (`flags.declare`) of the flags this setup reads beyond the common
        ones: its own, and parts such as the generator, the discriminator or privacy. A
        training run that gives a flag of another owner is refused (it would be silently
        ignored); a preset flag of another owner is None in its config. Which flags a resume
        must keep is a fact of each flag (`Flag.fixed_on_resume`).
      metrics: the names of the numbers its evaluations (`periodic_evaluation`, `evaluate`)
        can report,
        nested ones as "outer/inner": the metric columns of TensorBoard's HParams dashboard.
      network_roles: the models a user's own network may fill, each named by its flag
        (`--generator`, `--discriminator`; `user_networks`); a run setting another is refused.
        `adversarial_setup.AdversarialSetup` lists both and builds them in its role hooks.
    """

    presets: Mapping[str, Mapping[str, Any]] = {}
    flag_owners: tuple[str, ...] = ()
    metrics: tuple[str, ...] = ()
    network_roles: tuple[str, ...] = ()

    def check_flags(self, config: Config) -> None:
        """Rejects flag values this setup cannot use (ConfigError). Pure Python: runs before
        TensorFlow is imported, after the generic checks of `config.validation`."""

    def dataset_info(self, config: Config) -> DatasetInfo:
        """What the run trains on (no data is read): by default `--dataset`."""
        from datasets import registry
        return registry.dataset_info(config.dataset, resolution=config.resolution,
                                     channels=config.channels)

    def check_data(self, config: Config, info: DatasetInfo, num_replicas: int = 1) -> None:
        """Rejects data (and a replica count) this setup cannot train on, before anything is
        built (ConfigError)."""

    def training_sets(self, config: Config, info: DatasetInfo) -> dict[str, int | None]:
        """The data the phases draw real batches from, each named by its flag and value, with
        its number of training examples (None: endless, or unknown before it is read): the train
        mode refuses a --batch_size larger than any. By default `--dataset`'s training split."""
        return {f"--dataset={config.dataset}": info.num_examples}

    def training_examples(self, config: Config) -> Callable[[], tf.data.Dataset]:
        """``fn() -> tf.data.Dataset`` of the unbatched training examples (a dict per example,
        image or point under "x"); by default the training split of `--dataset`."""
        from datasets import registry
        return lambda: registry.training_examples(
            config.dataset, data_dir=config.data_dir, fashion_mnist_dir=config.fashion_mnist_dir,
            resolution=config.resolution, seed=config.seed, channels=config.channels)

    def learning_rates(self, config: Config) -> Mapping[str, LearningRate]:
        """The rate of every optimizer its phases name (`Phase.optimizers`), by optimizer name:
        which flags set which model's rate is the setup's to say, not a naming convention."""
        return {}

    def build(self, config: Config, info: DatasetInfo) -> Parts:
        """The models, phases, loss weights and sampling of one run. `building.build_run` calls
        it inside the strategy's scope and the `--precision` dtype policy (a model that must
        keep its own, a loaded teacher, is loaded as saved), then builds the optimizers of
        every optimizer the phases name from `learning_rates`."""
        raise NotImplementedError(f"{type(self).__name__} must implement build().")

    def summaries(self, config: Config, built: Built, info: DatasetInfo) -> list[PeriodicAction]:
        """The setup's periodic image jobs (sample grids, translations) every --image_every
        cycles; losses, histograms and progress are written for every setup by the train mode."""
        return []

    def periodic_evaluation(self, config: Config, built: Built,
                            info: DatasetInfo) -> PeriodicEvaluation | None:
        """What `--eval_every` evaluates, or None when the setup is evaluated only after
        training (the train mode then refuses --eval_every before training)."""
        return None

    def sample(self, config: Config, restored: Restored) -> int:
        """`--mode=sample`: writes `config.output` from the restored run; returns the number of
        samples written."""
        raise ConfigError(f"--mode=sample: --setup={restored.run.setup} runs cannot be sampled.")

    def evaluate(self, config: Config, run: Config, restored: Restored | None) -> dict[str, Any]:
        """`--mode=eval`: every metric of the restored run, JSON-ready; `restored` is None with
        `--real_vs_real` (the metrics of real data against real data: the floor)."""
        raise ConfigError(f"--mode=eval: --setup={run.setup} runs have no evaluation.")

    def export_archive(self, config: Config, restored: Restored) -> Export:
        """`--mode=export`: the SavedModel endpoints of the restored run (rebuilt in float32),
        or a ConfigError saying why this setup cannot be exported."""
        raise ConfigError(f"--mode=export: --setup={restored.run.setup} runs cannot be exported.")
