"""Fine-tuning (`--init_from=LOGDIR[:STEP]`): a new run starts from another run's model weights.

Where the weights come from: the source run is rebuilt from its own config.json through its own
setup and one of its checkpoints restored, as sample, eval and export rebuild a run
(`restore.restore`). Each model the new run trains (its phases' models) then takes the weights of
the source's model of the same name, weight by weight in the model's order, which must agree in
number and shapes; so does its EMA generator, from the source's, or from the generator just
loaded when the source keeps none (as a fresh EMA run starts). A model the new run does not
train (a teacher read from --teacher, CycleGAN's image histories) stays as it was built: it holds
no learned weights. Matching by name and shape makes it generic: another setup's run fits when
its models do (dcgan -> wgan with the same networks), and anything else is refused before
training, naming both runs, the model and the shapes.

What stays fresh: optimizer slots and counters, the step, learning-rate scales, loss weights and
dropout's random state. The new run trains on its own data from step 0 with its own schedule,
as StyleGAN2-ADA's resume_pkl and Keras's warm starts do.

Only a new run loads: a run resumed from its own checkpoints continues from them bit-exactly and
never reads the source again (it may be gone). The source, its checkpoint and step, and where
each model's weights came from are recorded in LOGDIR/init_from.json.
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Sequence

import keras

from datasets import files
from trainers.config.flags import Config, ConfigError
from trainers.config.record import CHECKPOINT_SUBDIR, INIT_FROM_RECORD_FILE, RUN_RECORD_FILE
from trainers.config.source_run import Source, check
from trainers.engine.checkpoints import newest_intact, unreadable_reason, warn_unreadable
from trainers.engine.phases import Phase
from trainers.modes import restore
from trainers.setups.protocol import Built, Restored

# An EMA model, and the model it averages (`building.ema_updater`): it is loaded from the
# source's EMA model or, when the source keeps none, from the model it averages.
EMA_MODELS = {"generator_ema": "generator"}


def start_from_source(config: Config, built: Built, *, resumed: bool,
                      is_chief: bool) -> dict[str, Any] | None:
    """Loads the weights of the run `--init_from` names into `built`'s models, for a new run
    (not `resumed` from its own checkpoint); the chief records them in LOGDIR/init_from.json.
    Returns that record (None when nothing was loaded). ConfigError when the source cannot be
    read or its models do not fit."""
    if not config.init_from or resumed:
        return None
    source = check(config.init_from)
    if files.is_local(source.logdir):  # init_from.json names it whatever the working directory
        source = Source(os.path.abspath(source.logdir), source.step)
    checkpoint = source_checkpoint(config.init_from, source)
    restored = restore.restore(source.logdir, use_ema=False, precision="float32",
                               checkpoint=checkpoint)
    origins = load_weights(config, built.models, trained_models(built.phases), restored)
    record = {"init_from": config.init_from, "logdir": source.logdir, "checkpoint": checkpoint,
              "step": restored.step, "models": origins}
    if is_chief:
        files.write_json(os.path.join(config.logdir, INIT_FROM_RECORD_FILE), record)
    loaded = ", ".join(name if origin == name else f"{name} (from {origin})"
                       for name, origin in origins.items())
    print(f"Started from step {restored.step} of {source.logdir}: {loaded}.", flush=True)
    return record


def source_checkpoint(value: str, source: Source) -> str:
    """The checkpoint of `source` to start from: of its step, or its newest intact one (never
    moving a damaged one aside: the source run is not this run's to tidy)."""
    directory = os.path.join(source.logdir, CHECKPOINT_SUBDIR)
    if source.step is not None:
        path = os.path.join(directory, f"ckpt-{source.step}")
        reason = unreadable_reason(path)
        if reason is not None:
            raise ConfigError(f"--init_from={value!r}: {path} cannot be read ({reason}); name "
                              "another kept step, or leave out :STEP to start from the newest "
                              "intact checkpoint.")
        return path
    try:
        latest, unreadable = newest_intact(directory, may_move=False)
    except ConfigError as error:
        raise ConfigError(f"--init_from={value!r}: {error}") from None
    if latest is None:
        raise ConfigError(f"--init_from={value!r}: the run in {source.logdir} has no checkpoint "
                          "yet; train it until its first checkpoint, or name another run.")
    warn_unreadable(unreadable, latest)
    return latest


def trained_models(phases: Sequence[Phase]) -> tuple[str, ...]:
    """The models some phase updates, in first-use order."""
    return tuple(dict.fromkeys(name for phase in phases for name in phase.models))


def load_weights(config: Config, models: Mapping[str, keras.Model], trained: Sequence[str],
                 restored: Restored) -> dict[str, str]:
    """Copies into `models` the weights of the `trained` models and the EMA models from
    `restored` (the source run); returns the name of each loaded model's model in the source
    (see the module docstring). ConfigError, before any weight is copied, when one does not
    fit."""
    source = restored.built.models
    missing = [name for name in trained if name not in source]
    if missing:
        raise ConfigError(
            f"--init_from={config.init_from!r}: the source run {restored.run.logdir} "
            f"(--setup={restored.run.setup}) has no {missing[0]}, which this run "
            f"({config.logdir}, --setup={config.setup}) trains; its models are {sorted(source)}. "
            "Start from a run whose setup has the same models, or drop --init_from.")
    origins = {name: name for name in trained}
    for average, averaged in EMA_MODELS.items():
        if average in models:
            origins[average] = average if average in source else averaged
    for name, origin in origins.items():
        require_same_shapes(config, restored, name, source[origin], models[name])
    for name, origin in origins.items():
        models[name].set_weights(source[origin].get_weights())
    return origins


def require_same_shapes(config: Config, restored: Restored, name: str, there: keras.Model,
                        here: keras.Model) -> None:
    """ConfigError naming both runs, the model and the shapes, unless `there` (of the source
    run) has as many weights as `here` (this run's `name`), of the same shapes."""
    shapes = [(tuple(a.shape), tuple(b.shape), b.path) for a, b in zip(there.weights, here.weights)]
    if len(there.weights) != len(here.weights):
        problem = f"it has {len(there.weights)} weights there and {len(here.weights)} here"
    else:
        unequal = [f"{path} is {a} there and {b} here" for a, b, path in shapes if a != b]
        if not unequal:
            return
        problem = f"weight {unequal[0]}" + (f" (and {len(unequal) - 1} more)" if unequal[1:] else "")
    source = restored.run
    raise ConfigError(
        f"--init_from={config.init_from!r}: the {name} of the source run {source.logdir} (step "
        f"{restored.step}, --setup={source.setup}, trained on {source.dataset}, images "
        f"{'x'.join(map(str, restored.info.shape))}) does not fit the {name} of this run "
        f"({config.logdir}, --setup={config.setup}, --dataset={config.dataset}): {problem}. Train "
        f"with the source's network flags (its {RUN_RECORD_FILE}: --g_width, --d_width, "
        "--latent_dim, --arch...) on images of the same shape and classes, or drop --init_from.")
