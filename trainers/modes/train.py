"""`--mode=train`: wires config, data, setup, state, trainer and controller together.

Rerunning the same command with the same `--logdir` resumes from the latest checkpoint; the
flags that fix the model, the schedule or the data order must then match the first run's,
which is recorded in `LOGDIR/config.json`, and the data must still give what
`LOGDIR/dataset.json` records.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
import sys
from typing import Callable, Sequence

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from datasets import files, memory, pipeline
from datasets.errors import DatasetError
from datasets.registry import DatasetInfo, info_as_record, info_from_record
from trainers.config import batch
from trainers.config.flags import Config, ConfigError, read_by, recorded_value
from trainers.config.hparams import hparam_specs, hparam_values
from trainers.config.record import (BEST_CHECKPOINT_SUBDIR, CHECKPOINT_SUBDIR, DATASET_RECORD_FILE,
                                    RUN_RECORD_FILE, read_dataset_record, read_run_record,
                                    write_dataset_record)
from trainers.config.validation import frozen_structure, train_time_seconds
from trainers.engine.checkpoints import RunCheckpoints, Unreadable
from trainers.engine.controller import Controller, NanPolicy, PeriodicAction
from trainers.engine import failed_start, hardware
from trainers.engine.distribution import make_strategy, worker_role
from trainers.engine.phases import Phase, batches_after
from trainers.engine.preemption import ClusterPreemption, SignalPreemption
from trainers.engine.run_lock import exclusive_training
from trainers.engine.state import TrainingState
from trainers.engine.time_budget import TimeBudget
from trainers.engine.trainer import Trainer
from trainers.evaluation import tags
from trainers.evaluation.best import best_checkpoint_job
from trainers.modes import init_from
from trainers.outputs import actions, hparams, summaries
from trainers.outputs.history import History
from trainers.outputs.progress import Progress
from trainers.setups import building, registry, user_networks
from trainers.setups.protocol import Built, Restored, Setup


def check_resumable(config: Config) -> None:
    """On a resume, rejects the flags a resume must keep (`Flag.fixed_on_resume`) of those its
    setup reads (a run recorded before distill's student had its own flags recorded the
    discriminator's, which its setup no longer reads) when they differ from LOGDIR/config.json;
    other in-memory data by `memory.check_resume`, which says what the run needs."""
    previous = read_run_record(config.logdir)
    if previous is None:
        return
    memory.check_resume(recorded_value(previous, "dataset"), config.dataset, config.logdir)
    current = config.as_dict()
    fixed = [name for name, flag in read_by(registry.get(config.setup).flag_owners).items()
             if flag.fixed_on_resume]
    recorded = {k: recorded_value(previous, k) for k in fixed}
    changed = [f"--{k}={current[k]!r} (was {recorded[k]!r})"
               for k in fixed if recorded[k] != current[k]]
    if changed:
        raise ConfigError(
            f"{config.logdir} holds a run with different settings: {', '.join(changed)}. "
            "Use the original values to resume, or a new --logdir to start a new run.")
    was = recorded_value(previous, "lr_multipliers")
    if frozen_structure(was) != frozen_structure(config.lr_multipliers):
        raise ConfigError(
            f"--lr_multipliers={config.lr_multipliers!r} has other patterns, or freezes other "
            f"ones, than the run in {config.logdir} (was {was!r}), which decides the optimizer "
            "slots in its checkpoints. Keep its patterns in order and its 0 factors (other "
            "factors may change), or use a new --logdir.")


# What a resume must find unchanged in the data: the models' shapes and the labels' meaning.
FIXED_DATA = ("kind", "shape", "num_classes", "class_names")


def check_data_unchanged(config: Config, info: DatasetInfo) -> None:
    """On a resume, rejects data that no longer gives what LOGDIR/dataset.json records (a folder
    whose images or class sub-folders changed would otherwise silently change the labels)."""
    recorded = read_dataset_record(config.logdir, info_from_record)
    if recorded is None:
        return
    then, now = info_as_record(recorded), info_as_record(info)
    changed = [f"{field} {now[field]} (was {then[field]})" for field in FIXED_DATA
               if now[field] != then[field]]
    if changed:
        raise DatasetError(
            f"{info.name} now gives {', '.join(changed)}, not what the run in {config.logdir} "
            "was trained on; resuming would change what its models and labels mean. Restore "
            "the data as it was, or train a new run with a new --logdir.")


def write_dataset_once(config: Config, info: DatasetInfo) -> None:
    """Records what the run trains on in LOGDIR/dataset.json (kept on resume)."""
    if not files.exists(os.path.join(config.logdir, DATASET_RECORD_FILE)):
        write_dataset_record(config.logdir, info_as_record(info))


def write_config_once(config: Config) -> None:
    """Records the first run's flags in LOGDIR/config.json (atomically; kept on resume)."""
    path = os.path.join(config.logdir, RUN_RECORD_FILE)
    if not files.exists(path):
        files.write_json(path, config.as_dict())


def make_dataset_fn(config: Config, strategy: tf.distribute.Strategy, phases: Sequence[Phase],
                    examples: Callable[[], tf.data.Dataset]):
    """``fn(global_batches_done) -> distributed dataset`` of `examples()` (the setup's training
    examples); `phases` say how many batches the whole run (--train_cycles cycles) draws, no
    end known without a cycle limit."""
    global_batches_in_run = (None if config.train_cycles is None
                             else batches_after(phases, config.train_cycles))

    def make(global_batches_done: int):
        input_fn = pipeline.training_input_fn(
            examples, global_batch_size=config.batch_size, seed=config.seed,
            shuffle_buffer=config.shuffle_buffer, skip_global_batches=global_batches_done,
            global_batches_needed=(None if global_batches_in_run is None
                                   else max(global_batches_in_run - global_batches_done, 0)))
        return strategy.distribute_datasets_from_function(input_fn)

    return make


def resolve_precision(config: Config) -> Config:
    """`config` with `--precision=auto` (the default) resolved (so config.json records the
    precision trained with), printing the choice, or the one warning line when
    mixed_bfloat16 is asked for where it is emulated.

    auto is the run's own precision on a resume (LOGDIR/config.json's: a run moved to another
    machine still resumes with the command it started with), float32 with a user network
    (which keeps the dtype policy it was built with), and else bfloat16 where the hardware
    computes it natively (`hardware.resolve_precision`).
    """
    previous = read_run_record(config.logdir) if config.precision == "auto" else None
    if previous is not None:
        recorded = recorded_value(previous, "precision")
        precision, warning = hardware.resolve_precision(recorded, native=hardware.detect())
        line = f"--precision=auto: {recorded} (the run's own, from {RUN_RECORD_FILE})."
        line = line if warning is None else f"{line} {warning}"
    elif config.precision == "auto":
        precision, line = building.auto_precision(config)
    else:
        precision, line = hardware.resolve_precision(config.precision, native=hardware.detect())
    if line is not None:
        print(line, file=sys.stderr, flush=True)
    return dataclasses.replace(config, precision=precision)


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

    info: DatasetInfo
    setup: Setup
    built: Built
    state: TrainingState
    manager: RunCheckpoints
    trainer: Trainer
    strategy: tf.distribute.Strategy
    is_chief: bool
    unreadable: list[Unreadable]  # checkpoints passed over on restore


def build(config: Config, strategy: tf.distribute.Strategy | None = None, *,
          hold: contextlib.ExitStack | None = None) -> TrainingRun:
    """Everything a training run needs, restored from LOGDIR's newest intact checkpoint.

    Pass `strategy` when it had to be created first (multi-worker: before any TF op). Every
    check (flags against a resumed run, data, batch split and size, what the setup can train
    on) runs before anything is written to the run directory. With `hold`, the chief then takes
    the run's lock (`run_lock.exclusive_training`) into it, under which a start that fails on
    its data or flags removes what it wrote (`failed_start`), and may move unreadable
    checkpoints aside; without, nothing is locked or moved (a run built for inspection).
    """
    strategy = strategy or make_strategy(config.strategy, cpu_replicas=config.cpu_replicas)
    replicas = strategy.num_replicas_in_sync
    is_chief, worker = worker_role(strategy)
    setup = registry.get(config.setup)
    info = setup.dataset_info(config)
    setup.check_data(config, info, replicas)
    batch.check_split(config, replicas)
    for name, size in setup.training_sets(config, info).items():
        batch.check_fits(config, name, size, replicas)
    check_resumable(config)
    check_data_unchanged(config, info)
    # Resolves the data source now (preparing TFDS data if needed), so a missing dataset is
    # reported before anything is written to the run directory.
    examples = setup.training_examples(config)
    examples()
    # Seeds Python, NumPy and Keras so weight initialisation is a function of --seed.
    keras.utils.set_random_seed(config.seed)
    built = building.build_run(setup, config, info, strategy)
    state = TrainingState.create(models=built.models, optimizers=built.optimizers,
                                 learning_rate_scales=built.learning_rate_scales,
                                 loss_weights=built.loss_weights)
    manager = RunCheckpoints(state.checkpoint(), os.path.join(config.logdir, CHECKPOINT_SUBDIR),
                             max_to_keep=config.keep_checkpoints, is_chief=is_chief, worker=worker)
    if hold is not None and is_chief:
        hold.enter_context(failed_start.leaves_nothing_behind(
            config.logdir, lock=exclusive_training(config.logdir)))
    restored, unreadable = manager.restore_latest(may_move=hold is not None)
    if restored is not None:
        logging.info("Resumed from %s at step %d.", restored, int(state.step.numpy()))
    trainer = Trainer(strategy=strategy, state=state, phases=built.phases,
                      make_dataset=make_dataset_fn(config, strategy, built.phases, examples),
                      global_batch_size=config.batch_size, seed=config.seed,
                      jit_compile=config.jit_compile)
    return TrainingRun(info=info, setup=setup, built=built, state=state, manager=manager,
                       trainer=trainer, strategy=strategy, is_chief=is_chief,
                       unreadable=unreadable)


def comparison_metrics(features: str) -> list[hparams.MetricColumn]:
    """The HParams dashboard's metric columns, the same for every run scored on `features`
    (`tags.features_name` of its --evaluator): each metric of every setup, named as its
    evaluations name it (`tags.feature_key` for those computed on features), as last logged by
    --eval_every (`eval/<name>` in the run) and, beside it, by --mode=eval (in LOGDIR/eval/),
    so the default view (the first columns) shows a run's FID whichever mode measured it; then
    the training speed."""
    columns = []
    for metric in registry.metric_names():
        name = (tags.feature_key(metric, features)
                if metric.rsplit("/", 1)[-1] in tags.FEATURE_METRICS else metric)
        columns += [hparams.MetricColumn(tags.metric_tag(name), display_name=name),
                    hparams.MetricColumn(tags.metric_tag(name), group=tags.EVAL_MODE_RUN,
                                         display_name=f"{name} (--mode=eval)")]
    return [*columns, hparams.MetricColumn(actions.IMAGES_PER_SECOND, display_name="images/second")]


def evaluation_job(config: Config, run: TrainingRun) -> PeriodicAction:
    """`--eval_every`: the setup's periodic evaluation, and the best checkpoint in
    LOGDIR/checkpoints_best."""
    evaluation = run.setup.periodic_evaluation(config, run.built, run.info)
    if evaluation is None:
        raise ConfigError(f"--eval_every={config.eval_every} is invalid: --setup={config.setup} is "
                          "evaluated after training, with --mode=eval; use --eval_every=0.")
    return best_checkpoint_job(
        every=config.eval_every, evaluate=evaluation.evaluate, selection=evaluation.selection,
        basis=evaluation.basis, checkpoint=run.manager.checkpoint,
        best_directory=os.path.join(config.logdir, BEST_CHECKPOINT_SUBDIR),
        is_chief=run.is_chief, worker=worker_role(run.strategy)[1])


def resumed_time_budget(config: Config, run: TrainingRun) -> TimeBudget | None:
    """--train_time's budget, less what the run used up to its restored step (None without)."""
    budget = train_time_seconds(config.train_time)
    return None if budget is None else TimeBudget.resumed(
        seconds=budget, logdir=config.logdir, step=int(run.state.step.numpy()))


def periodic_jobs(config: Config, run: TrainingRun, time_budget: TimeBudget | None,
                  progress_stream) -> list[PeriodicAction]:
    """The losses after every loop; the setup's images, histograms and evaluation at their
    intervals; and on the chief, progress lines and the privacy spent."""
    # --image_every=0 and --histogram_every=0 mean never; a PeriodicAction of every=0
    # would run after every loop (as the losses and progress do).
    jobs: list[PeriodicAction] = [actions.scalar_summaries()]
    if config.image_every > 0:
        jobs.extend(run.setup.summaries(config, run.built, run.info))
    if config.histogram_every > 0:
        jobs.append(actions.histogram_summaries(every=config.histogram_every,
                                                models=run.built.models))
    if config.eval_every > 0:
        jobs.append(evaluation_job(config, run))
    if run.is_chief:
        jobs.append(PeriodicAction(name="progress", every=0, fn=Progress(
            total_steps=config.train_cycles, stream=progress_stream,
            time_left=None if time_budget is None else time_budget.left)))
        if any(phase.privacy for phase in run.built.phases):
            jobs.append(actions.privacy_summaries(
                run.built.phases, global_batch_size=config.batch_size,
                num_examples=run.info.num_examples, delta=config.dp_delta))
    return jobs


def write_records(config: Config, run: TrainingRun) -> None:
    """The chief's records of the run, each written once: its user networks' architectures,
    LOGDIR/config.json and LOGDIR/dataset.json."""
    user_networks.save_architectures(config, run.built.models, run.setup.network_roles)
    write_config_once(config)
    write_dataset_once(config, run.info)


def make_controller(config: Config, run: TrainingRun, jobs: Sequence[PeriodicAction],
                    time_budget: TimeBudget | None,
                    stop_requested: Callable[[], bool] | None = None) -> Controller:
    """The outer loop of `run`, with its jobs, NaN policy, time budget, preemption watch
    (the cluster's under --strategy=multi_worker, else SIGTERM and Ctrl-C) and
    `stop_requested` (`Controller`)."""
    preemption = (ClusterPreemption(run.strategy, run.manager)
                  if config.strategy == "multi_worker" else SignalPreemption())
    return Controller(
        trainer=run.trainer, train_cycles=config.train_cycles,
        cycles_per_loop=config.cycles_per_loop, checkpoint_manager=run.manager,
        checkpoint_every=config.checkpoint_every, actions=jobs,
        nan_policy=NanPolicy(rollback=config.nan_policy == "rollback",
                             learning_rate_factor=config.nan_lr_factor,
                             max_rollbacks=config.max_rollbacks),
        preemption=preemption, time_budget=time_budget,
        train_time_progress=run.built.train_time_progress, stop_requested=stop_requested)


def write_start(config: Config, run: TrainingRun, step: int) -> None:
    """What the summaries record as the run starts at `step`: a new run's config (Text tab)
    and HParams session, and the checkpoints passed over on restore."""
    if step == 0:
        summaries.write_config(config.as_dict(), step=0)
        hparams.write_experiment(hparam_specs(),
                                  comparison_metrics(tags.features_name(config.evaluator)))
        hparams.write_session(hparam_values(config))
    if run.unreadable:
        tf.summary.text("checkpoints", "\n\n".join(
            f"{entry.describe()}; resumed at step {step}." for entry in run.unreadable), step=step)


def run_with_summaries(config: Config, run: TrainingRun, controller: Controller) -> None:
    """Runs `controller` with the run's summary writer (the chief's event file in LOGDIR,
    nothing on other workers) as the default one."""
    writer = (tf.summary.create_file_writer(config.logdir) if run.is_chief
              else tf.summary.create_noop_writer())
    with writer.as_default():
        write_start(config, run, controller.step)
        if controller.finished():
            limit = (f"--train_cycles={config.train_cycles}" if controller.steps_done()
                     else f"--train_time={config.train_time} used up")
            print(f"Run in {config.logdir} already finished at step {controller.step} "
                  f"({limit}); nothing to train.", flush=True)
        try:
            controller.run()
        finally:
            controller.preemption.close()
            writer.flush()


def train(config: Config, *, strategy: tf.distribute.Strategy | None = None,
          progress_stream=None, history: History | None = None) -> Controller:
    """Trains (or resumes) the run in `config.logdir`; returns the finished controller.

    `history` (the chief's) records every loop's scalars and drives its Keras callbacks
    (`outputs.history`), after the jobs that write them.

    A new run with `--init_from` starts from that run's model weights (`init_from`). Only the
    chief of a multi-worker job writes summaries, config.json and progress lines,
    and holds the run's lock (a second training process on the logdir is refused). Nothing is
    written before every check and job is made; a start that still fails on its data or flags
    removes what it wrote (`failed_start`). A new run writes its config (Text tab) and its
    HParams session once, at step 0, so a resumed run keeps the values it started with and
    stays one row of the HParams dashboard.
    """
    config = resolve_precision(config)
    with contextlib.ExitStack() as hold:  # the run's lock, released however training ends
        run = build(config, strategy, hold=hold)
        init_from.start_from_source(config, run.built, is_chief=run.is_chief,
                                    resumed=run.manager.latest_checkpoint is not None)
        time_budget = resumed_time_budget(config, run)
        jobs = periodic_jobs(config, run, time_budget, progress_stream)
        history = history if run.is_chief else None
        if history is not None:
            jobs.append(history.job())
        if run.is_chief:
            write_records(config, run)
        # A callback's stop on the chief alone would leave the other workers waiting.
        stop = (history.stop_requested if history is not None and config.strategy != "multi_worker"
                else None)
        controller = make_controller(config, run, jobs, time_budget, stop)
        if history is not None:
            sampling = run.built.sampling
            history.begin(run.built.models.get(sampling.model if sampling else "generator"))
        run_with_summaries(config, run, controller)
        if history is not None:
            history.end()
        if run.is_chief:
            write_final_samples(config, run, controller.step)
        print(f"Finished at step {controller.step}; weights fingerprint {fingerprint(run.state)}",
              flush=True)
        return controller


# What a finished run leaves for looking at, in LOGDIR.
FINAL_SAMPLES_FILE = "samples.png"


def write_final_samples(config: Config, run: TrainingRun, step: int) -> str | None:
    """LOGDIR/samples.png: what `--mode=sample` draws from the weights just trained (the
    setup's `sample` hook, --seed's noise, --num_samples of them), so a run directory shows its
    result without TensorBoard. None, and no file, for a setup that draws nothing (its hook
    refuses with a ConfigError: distillation)."""
    path = os.path.join(config.logdir, FINAL_SAMPLES_FILE)
    restored = Restored(run=config, info=run.info, built=run.built,
                        checkpoint=run.manager.latest_checkpoint or "", step=step)
    try:
        run.setup.sample(dataclasses.replace(config, mode="sample", output=path), restored)
    except ConfigError:
        return None
    return path
