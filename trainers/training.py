"""`--mode=train`: wires config, data, setup, state, trainer and controller together.

Rerunning the same command with the same `--logdir` resumes from the latest checkpoint; the
flags that fix the model, the schedule or the data order must then match the first run's,
which is recorded in `LOGDIR/config.json`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from typing import Sequence

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from datasets import pipeline, registry
from trainers import actions, cyclegan, presets
from trainers.outputs import images
from trainers.outputs import summaries
from trainers.config.fields import Config, ConfigError
from trainers.config.presets import recorded_value
from trainers.config.record import RUN_RECORD_FILE, read_run_record
from trainers.engine.checkpoints import BEST_CHECKPOINT_SUBDIR, CHECKPOINT_SUBDIR, RunCheckpoints
from trainers.engine.controller import Controller, NanPolicy, PeriodicAction
from trainers.engine.distribution import make_strategy, worker_role
from trainers.evaluation import periodic_evaluation
from trainers.engine.phases import Phase, batches_after
from trainers.engine.preemption import ClusterPreemption, SignalPreemption
from trainers.outputs.progress import Progress
from trainers.engine.state import TrainingState
from trainers.engine.trainer import Trainer

# Flags that a resumed run must keep: they change the variables, the schedule or the data order.
RESUME_FIXED = ("gan", "dataset", "resolution", "latent_dim", "g_width", "d_width",
                "g_extra_blocks", "g_upsample", "d_extra_blocks", "d_dropout",
                "d_normalization", "optimizer", "loss", "batch_size", "d_steps", "g_steps",
                "seed", "shuffle_buffer", "precision", "ema_halflife_kimg", "penalty", "penalty_every",
                "d_spectral_norm", "domain_a", "domain_b", "update_order", "pack")

FIXED_NOISE_SALT = 7919


def check_resumable(config: Config) -> None:
    """On a resume, rejects flags in RESUME_FIXED that differ from LOGDIR/config.json."""
    previous = read_run_record(config.logdir)
    if previous is None:
        return
    current = config.as_dict()
    recorded = {k: recorded_value(previous, k) for k in RESUME_FIXED}
    changed = [f"--{k}={current[k]!r} (was {recorded[k]!r})"
               for k in RESUME_FIXED if recorded[k] != current[k]]
    if changed:
        raise ConfigError(
            f"{config.logdir} holds a run with different settings: {', '.join(changed)}. "
            "Use the original values to resume, or a new --logdir to start a new run.")


def write_config_once(config: Config) -> None:
    """Records the first run's flags in LOGDIR/config.json (atomically; kept on resume)."""
    path = os.path.join(config.logdir, RUN_RECORD_FILE)
    if os.path.exists(path):
        return
    record = json.dumps(config.as_dict(), indent=2, sort_keys=True).encode()
    images.write_atomically(path, lambda handle: handle.write(record))


def fixed_noise(config: Config, latent_shape: tuple[int, ...], count: int) -> tf.Tensor:
    """The noise batch used for every progress image of a run (derived from --seed)."""
    return tf.random.stateless_normal([count, *latent_shape], seed=[config.seed, FIXED_NOISE_SALT])


def examples_fn(config: Config):
    """``fn() -> tf.data.Dataset`` of the unbatched training examples; for cyclegan
    ``fn() -> {"a": images, "b": images}``, which the pipeline zips into unpaired examples."""
    if config.gan == "cyclegan":
        return cyclegan.training_examples(config)
    return lambda: registry.training_examples(
        config.dataset, data_dir=config.data_dir,
        fashion_mnist_dir=config.fashion_mnist_dir, resolution=config.resolution, seed=config.seed)


def make_dataset_fn(config: Config, strategy: tf.distribute.Strategy,
                    phases: Sequence[Phase]):
    """``fn(global_batches_done) -> distributed dataset`` over the training split; `phases`
    say how many batches the whole run (--train_steps cycles) draws."""
    global_batches_in_run = batches_after(phases, config.train_steps)

    def make(global_batches_done: int):
        input_fn = pipeline.training_input_fn(
            examples_fn(config), global_batch_size=config.batch_size, seed=config.seed,
            shuffle_buffer=config.shuffle_buffer, skip_global_batches=global_batches_done,
            global_batches_needed=max(global_batches_in_run - global_batches_done, 0))
        return strategy.distribute_datasets_from_function(input_fn)

    return make


def fingerprint(state: TrainingState) -> str:
    """A short hash of every model variable: equal on workers (and runs) holding equal weights."""
    digest = hashlib.sha256()
    for model in state.models.values():
        for variable in model.variables:
            digest.update(np.ascontiguousarray(variable.numpy()).tobytes())
    return digest.hexdigest()[:16]


@dataclasses.dataclass(frozen=True)
class TrainingRun:
    """The parts of a built (and possibly restored) training run."""

    info: registry.DatasetInfo
    setup: presets.Setup
    state: TrainingState
    manager: RunCheckpoints
    trainer: Trainer
    strategy: tf.distribute.Strategy
    is_chief: bool


def build(config: Config, strategy: tf.distribute.Strategy | None = None) -> TrainingRun:
    """Everything a training run needs, restored from LOGDIR when a checkpoint exists.

    Pass `strategy` when it had to be created first (multi-worker: before any TF op).
    """
    strategy = strategy or make_strategy(config.strategy, cpu_replicas=config.cpu_replicas)
    is_chief, worker = worker_role(strategy)
    info = presets.dataset_info(config)
    presets.check_dataset(config, info)
    check_resumable(config)
    # Resolves the data source now (preparing TFDS data if needed), so a missing dataset is
    # reported before anything is written to the run directory.
    examples_fn(config)()
    if config.batch_size % strategy.num_replicas_in_sync:
        raise ConfigError(
            f"--batch_size={config.batch_size} is not divisible by the "
            f"{strategy.num_replicas_in_sync} replicas; use a multiple of it.")
    if (config.batch_size // strategy.num_replicas_in_sync) % config.pack:
        raise ConfigError(
            f"--pack={config.pack}: each of the {strategy.num_replicas_in_sync} replicas gets "
            f"{config.batch_size // strategy.num_replicas_in_sync} examples, which do not split "
            f"into packs of {config.pack}; use a --batch_size that is a multiple of "
            f"{config.pack * strategy.num_replicas_in_sync}.")
    if config.jit_compile and info.kind == "image" and strategy.num_replicas_in_sync > 1:
        raise ConfigError(
            f"--jit_compile with {strategy.num_replicas_in_sync} replicas: the DCGAN generator's "
            "synchronized batch norm all-reduces inside the forward pass, which XLA cannot "
            "compile; use one replica or --jit_compile=false.")
    # Seeds Python, NumPy and Keras so weight initialisation is a function of --seed.
    keras.utils.set_random_seed(config.seed)
    setup = presets.build_setup(config, info, strategy)
    state = TrainingState.create(models=setup.models, optimizers=setup.optimizers,
                                 learning_rate_scales=setup.learning_rate_scales,
                                 loss_weights=setup.loss_weights)
    manager = RunCheckpoints(state.checkpoint(), os.path.join(config.logdir, CHECKPOINT_SUBDIR),
                             max_to_keep=config.keep_checkpoints, is_chief=is_chief, worker=worker)
    restored = manager.restore_latest()
    if restored is not None:
        logging.info("Resumed from %s at step %d.", restored, int(state.step.numpy()))
    if is_chief:
        write_config_once(config)
    trainer = Trainer(strategy=strategy, state=state, phases=setup.phases,
                      make_dataset=make_dataset_fn(config, strategy, setup.phases),
                      global_batch_size=config.batch_size, seed=config.seed,
                      jit_compile=config.jit_compile)
    return TrainingRun(info=info, setup=setup, state=state, manager=manager, trainer=trainer,
                       strategy=strategy, is_chief=is_chief)


def train(config: Config, *, strategy: tf.distribute.Strategy | None = None,
          progress_stream=None) -> Controller:
    """Trains (or resumes) the run in `config.logdir`; returns the finished controller.

    Only the chief of a multi-worker job writes summaries, config.json and progress lines.
    """
    run = build(config, strategy)
    info, setup = run.info, run.setup
    jobs: list[PeriodicAction] = [
        actions.scalar_summaries(),
        actions.sample_summaries(
            every=config.image_every, sample=setup.sample, kind=info.kind, modes=info.modes,
            noise=fixed_noise(config, setup.latent_shape, 1000 if info.kind == "points" else 64))
        if setup.image_summaries is None else setup.image_summaries(config.image_every),
        actions.histogram_summaries(every=config.histogram_every, models=setup.models),
    ]
    if setup.num_classes:
        jobs.append(actions.class_sample_summaries(
            every=config.image_every, sample_labeled=setup.sample_labeled,
            num_classes=setup.num_classes, noise=fixed_noise(config, setup.latent_shape, 10)))
    if config.eval_every > 0:
        jobs.append(periodic_evaluation(
            config, info=info, sample=setup.sample, latent_shape=setup.latent_shape,
            checkpoint=run.manager.checkpoint,
            best_directory=os.path.join(config.logdir, BEST_CHECKPOINT_SUBDIR),
            is_chief=run.is_chief, worker=worker_role(run.strategy)[1],
            num_classes=setup.num_classes, sample_labeled=setup.sample_labeled))
    if run.is_chief:
        jobs.append(PeriodicAction(name="progress", every=0, fn=Progress(
            total_steps=config.train_steps, stream=progress_stream)))
    preemption = (ClusterPreemption(run.strategy, run.manager)
                  if config.strategy == "multi_worker" else SignalPreemption())
    controller = Controller(
        trainer=run.trainer, train_steps=config.train_steps,
        steps_per_loop=config.steps_per_loop, checkpoint_manager=run.manager,
        checkpoint_every=config.checkpoint_every, actions=jobs,
        nan_policy=NanPolicy(rollback=config.nan_policy == "rollback",
                             learning_rate_factor=config.nan_lr_factor,
                             max_rollbacks=config.max_rollbacks),
        preemption=preemption)
    writer = (tf.summary.create_file_writer(config.logdir) if run.is_chief
              else tf.summary.create_noop_writer())
    with writer.as_default():
        if controller.step == 0:
            summaries.write_config(config.as_dict(), step=0)
        if controller.step >= config.train_steps:
            print(f"Run in {config.logdir} already finished at step {controller.step} "
                  f"(--train_steps={config.train_steps}); nothing to train.", flush=True)
        try:
            controller.run()
        finally:
            preemption.close()
            writer.flush()
    print(f"Finished at step {controller.step}; weights fingerprint {fingerprint(run.state)}",
          flush=True)
    return controller
