"""Gantry from Python: what `run.py` does, as functions that return values.

    from trainers import api
    config = api.config(setup="dcgan", logdir="runs/nb", train_cycles=200)
    trained = api.train(config, images)                 # NumPy uint8 [N, H, W, C], or a tf.data.Dataset
    trained.history["generator/loss"]                   # [(step, value), ...] as TensorBoard shows
    generator = api.load_generator("runs/nb")           # a keras.Model
    samples = api.sample("runs/nb", num_samples=16)     # uint8 [16, H, W, C]

`config(**flags)` takes the flags by name and goes through `run_config`, the one function
`run.py` also uses: the same validation, preset resolution and, for a training run that is
resumed, the preset values recorded in LOGDIR/config.json. `train` takes in-memory data
(`datasets.memory`: the run records its fingerprint, so it resumes with the same data only),
Keras callbacks (`outputs.history`), a strategy and user networks (a `keras.Model` or a
function, `setups.user_networks`), saved with the run so that `sample`, `evaluate` and `export`
need neither. docs/python-api.md walks through it. Nothing is installed: the checkout is
imported from `sys.path` (a notebook elsewhere adds it with `sys.path.insert(0, CHECKOUT)`),
since top-level packages named `datasets` and `gan` would shadow other libraries.

This module imports TensorFlow only inside the functions that run a mode, so `run.py` checks
its flags through `run_config` before TensorFlow starts.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Mapping, Sequence, TextIO

# Every owner's flags, declared when its module is imported, in the order of Config's fields and
# of docs/flags.md: before anything else here imports one of them (the setups declare theirs
# after these, when the registry imports them).
import trainers.config.run_flags  # noqa: F401  isort: skip
import trainers.engine.flags  # noqa: F401  isort: skip
import trainers.setups.adversarial_flags  # noqa: F401  isort: skip
import trainers.engine.ema_flags  # noqa: F401  isort: skip
import trainers.engine.privacy_flags  # noqa: F401  isort: skip
import trainers.outputs.flags  # noqa: F401  isort: skip
import trainers.evaluation.flags  # noqa: F401  isort: skip
import trainers.modes.flags  # noqa: F401  isort: skip
from trainers.config.flags import Config, ConfigError, declared, renamed
from trainers.config.record import read_run_record
from trainers.setups import registry, user_networks

if TYPE_CHECKING:
    import keras
    import numpy as np
    import tensorflow as tf

    from datasets.memory import InMemory
    from trainers.modes.export import Exported

# What `train` returns as its history, and `history` reads: scalar tag -> [(step, value)].
Scalars = dict[str, list[tuple[int, float]]]

def run_config(flags: Mapping[str, Any]) -> Config:
    """The resolved, validated config of `flags` (flag name -> value, old names too; unset flags
    take their defaults). A training run being resumed keeps the preset values it started with
    (LOGDIR/config.json); flags given explicitly win."""
    flags = renamed(flags)
    unknown = sorted(set(flags) - set(declared()))
    if unknown:
        raise ConfigError(f"Unknown flag(s) {', '.join(unknown)}; `python run.py --help` lists "
                          "every flag.")
    config = Config(**flags)
    recorded = read_run_record(config.logdir) if config.mode == "train" else None
    return registry.resolve(config, recorded)


def flag_reference() -> str:
    """docs/flags.md: every declared flag, by owner (`config.reference`)."""
    from trainers.config.reference import markdown
    return markdown(declared().values(), runtime_choices={"setup": registry.names()})


def config(**flags: Any) -> Config:
    """A training config, checked as `run.py --flag=value ...` checks it."""
    return run_config(flags)


def prepare_runtime(config: Config) -> None:
    """What a process does before its first TensorFlow op: splits the CPU into
    --cpu_replicas devices and turns on --deterministic ops."""
    from trainers.engine.distribution import configure_cpu_replicas
    configure_cpu_replicas(config.cpu_replicas)
    if config.deterministic:
        import tensorflow as tf
        tf.config.experimental.enable_op_determinism()


@dataclasses.dataclass(frozen=True)
class Trained:
    """A finished (or already finished) training run: where it is, its step, its newest
    checkpoint, and the scalars this call logged after each loop (`history`: tag -> [(step,
    value)], the values of the event files; `api.history(logdir)` reads the whole run's)."""

    logdir: str
    step: int
    checkpoint: str | None
    history: Scalars = dataclasses.field(default_factory=dict)


def in_memory(data: Any, labels: Any = None, class_names: Sequence[str] | None = None
              ) -> InMemory | None:
    """`train`'s `data` as `datasets.memory` data (None for None); ValueError naming the
    argument that does not fit."""
    from datasets import memory
    if data is None:
        if labels is not None or class_names is not None:
            raise ValueError("labels and class_names describe data=...; pass the images too.")
        return None
    import tensorflow as tf
    if isinstance(data, tf.data.Dataset):
        if labels is not None:
            raise ValueError("labels: a tf.data.Dataset carries its own labels; give it (image, "
                             "label) elements or dicts {'image': ..., 'label': ...}.")
        return memory.from_dataset(data, class_names)
    return memory.from_arrays(data, labels, class_names)


def train(config: Config, data: Any = None, *, labels: Any = None,
          class_names: Sequence[str] | None = None,
          callbacks: Sequence[keras.callbacks.Callback] = (),
          generator: keras.Model | Any = None, discriminator: keras.Model | Any = None,
          strategy: tf.distribute.Strategy | None = None, progress_stream: TextIO | None = None
          ) -> Trained:
    """Trains (or resumes) the run in `config.logdir`, as `run.py` does.

    `data`: images to train on instead of --dataset, a NumPy array (uint8 [N, H, W, C] in
    [0, 255], or float in [-1, 1]) with optional `labels` (ints [N]) and `class_names`, or a
    `tf.data.Dataset` of images, (image, label) pairs or dicts, read into memory once
    (`datasets.memory`). The run records the data's fingerprint: resuming needs the same data.
    `callbacks`: `keras.callbacks.Callback`s called at the start, after each loop of
    --cycles_per_loop cycles with that loop's logged scalars (`on_epoch_end(step, logs)`), and
    at the end (`outputs.history`). `generator` and `discriminator` are a `keras.Model` (copied,
    weights included) or a function called like `--generator`'s (`user_networks`); the run
    records them as `instance:ClassName` or `module:function` and saves their architectures, so
    resuming with the same models continues exactly and sample/export need neither. `strategy`
    defaults to --strategy's.
    """
    from datasets import memory
    from trainers.modes import train as train_mode
    from trainers.outputs.history import History
    networks = {role: network for role, network in (("generator", generator),
                                                    ("discriminator", discriminator))
                if network is not None}
    for role in networks:
        if getattr(config, role):
            raise ConfigError(f"--{role}={getattr(config, role)!r} and a {role} passed to train(): "
                              "give one of them.")
    prepare_runtime(config)
    supplied = in_memory(data, labels, class_names)
    overrides = {role: user_networks.describe(network) for role, network in networks.items()}
    if supplied is not None:
        if config.dataset != Config.dataset and not memory.is_memory(config.dataset):
            raise ConfigError(f"--dataset={config.dataset!r} and data passed to train(): give "
                              "one of them.")
        overrides["dataset"] = supplied.name
    if overrides:
        config = run_config({**config.as_dict(), **overrides})
    history = History(callbacks)
    with user_networks.supplied(networks), memory.supplied(supplied):
        controller = train_mode.train(config, strategy=strategy, progress_stream=progress_stream,
                                      history=history)
    return Trained(logdir=config.logdir, step=controller.step,
                   checkpoint=controller.checkpoint_manager.latest_checkpoint,
                   history=history.values)


def history(logdir: str) -> Scalars:
    """Every scalar the training run in `logdir` wrote (all its sessions, in step order): what
    TensorBoard's Scalars tab shows of it, as tag -> [(step, value)]."""
    from trainers.outputs.summaries import scalar_records
    return {tag: sorted(records, key=lambda record: record[0])
            for tag, records in scalar_records(logdir, recursive=False).items()}


def _mode_config(mode: str, logdir: str, flags: Mapping[str, Any]) -> Config:
    config = run_config({**flags, "mode": mode, "logdir": logdir})
    prepare_runtime(config)
    return config


def sample(logdir: str, *, output: str | None = None, **flags: Any) -> np.ndarray:
    """`--mode=sample` of the run in `logdir` (flags: num_samples, grid, seed, checkpoint, ...)
    as a NumPy array, what its .npy output holds: uint8 [N, H, W, C] images, float32 [N, 2]
    points. `output` (a .png or .npy) also writes the file --mode=sample writes."""
    from trainers.modes.sample import sample_array
    return sample_array(_mode_config("sample", logdir, {**flags, "output": output or "unused.npy"}),
                        write=output is not None)


def load_generator(logdir: str, *, checkpoint: str = "latest", use_ema: bool = True
                   ) -> keras.Model:
    """The generator `--mode=sample` draws with, at `checkpoint` (latest, best or a step), as
    a float32 `keras.Model`: the EMA generator when the run keeps one (unless `use_ema` is
    False). It maps noise [N, latent_dim] (and labels [N] for a conditional run) to images in
    [-1, 1] or points, as README's "Your own networks" table says."""
    from trainers.modes.sample import sampling_model
    return sampling_model(_mode_config("sample", logdir,
                                       {"checkpoint": checkpoint, "use_ema": use_ema}))


def evaluate(logdir: str, data: Any = None, *, labels: Any = None,
             class_names: Sequence[str] | None = None, **flags: Any) -> dict[str, Any]:
    """`--mode=eval`: the metrics of a checkpoint of the run in `logdir`; a run trained on
    in-memory data needs that data again (`data`, `labels`, `class_names` as `train` took)."""
    from datasets import memory
    from trainers.modes.evaluate import evaluate as evaluate_mode
    config = _mode_config("eval", logdir, flags)
    with memory.supplied(in_memory(data, labels, class_names)):
        return evaluate_mode(config)


def export(logdir: str, **flags: Any) -> Exported:
    """`--mode=export`: the run's generator as a SavedModel (or TFLite); returns where it went."""
    from trainers.modes.export import export as export_mode
    return export_mode(_mode_config("export", logdir, flags))
