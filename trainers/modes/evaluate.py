"""`--mode=eval`: every metric of one checkpoint of the run in `--logdir`, as one JSON object.

The setup decides what is measured (FID and friends of images against the test split, modes of
a 2-D toy, translations per direction); this mode adds where the numbers come from: the
checkpoint, its step, the sampling model, the evaluator and, for a differentially private run,
the privacy spent up to that step (`engine.privacy.spent`). The numbers of a checkpoint's
evaluation are also written as `eval/*` scalars at its step into `LOGDIR/eval/`
(`evaluation.tags`), so TensorBoard, and the HParams dashboard's "(--mode=eval)" columns, show
a run evaluated after training; the real-vs-real floor is not the run's and is not written.
"""

from __future__ import annotations

import os
from typing import Any

from datasets.errors import DatasetError
from trainers.config.flags import Config
from trainers.evaluation import tags
from trainers.modes import restore
from trainers.outputs import summaries
from trainers.setups import registry
from trainers.setups.protocol import Setup


def evaluate(config: Config) -> dict[str, Any]:
    """The metrics of `--checkpoint` (latest, best or a step), or with `--real_vs_real` of the train
    split against the test split (the floor; no checkpoint needed)."""
    run = restore.load_run_config(config.logdir)
    setup = registry.get(run.setup)
    require_data(config, run, setup)
    if config.real_vs_real:
        results = setup.evaluate(config, run, None)
        context = {"checkpoint": None, "step": None, "real_vs_real": True}
    else:
        restored = restore.restore(config.logdir, use_ema=config.use_ema,
                                   checkpoint=restore.chosen_checkpoint(config.logdir, config.checkpoint))
        results = setup.evaluate(config, restored.run, restored)
        write_scalars(config.logdir, results, step=restored.step)
        context = {"checkpoint": restored.checkpoint, "step": restored.step}
        from trainers.engine import privacy
        spent = privacy.spent(restored.built.phases, restored.step,
                              global_batch_size=restored.run.batch_size,
                              num_examples=restored.info.num_examples, delta=restored.run.dp_delta)
        if spent is not None:
            context["privacy"] = spent
        if restored.built.sampling is not None:
            context["generator"] = restored.built.sampling.model
    return {**results, **context, "evaluator": config.evaluator}


def require_data(config: Config, run: Config, setup: Setup) -> None:
    """Unlike sample and export, which rebuild a run from its directory alone, eval evaluates it
    against its real data: a DatasetError saying so, before any model is built, when that data
    can no longer be read (a folder moved or deleted, TFDS data missing)."""
    try:
        setup.dataset_info(run)
    except DatasetError as error:
        raise DatasetError(
            f"--mode=eval of {config.logdir} needs the run's real images as its reference, "
            f"and they cannot be read: {error} Put the data back where the run was trained on "
            "it (--mode=sample and --mode=export need only the run directory).") from None


def write_scalars(logdir: str, results: dict[str, Any], *, step: int) -> None:
    """`results` as `eval/*` scalars at `step` in LOGDIR/eval/ (its own event file)."""
    import tensorflow as tf

    writer = tf.summary.create_file_writer(os.path.join(logdir, tags.EVAL_MODE_RUN))
    with writer.as_default():
        summaries.write_scalars(tags.eval_scalars(results), step=step)
    writer.close()
