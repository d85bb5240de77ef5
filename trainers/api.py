"""Gantry from Python: what `run.py` does, as functions that return values.

    from trainers import api
    config = api.config(setup="dcgan", logdir="runs/nb", train_cycles=200)
    api.train(config, generator=my_keras_model)        # or a function returning one
    api.sample("runs/nb", num_samples=16, output="samples.png")

`config(**flags)` takes the flags by name and goes through `run_config`, the one function
`run.py` also uses: the same validation, preset resolution and, for a training run that is
resumed, the preset values recorded in LOGDIR/config.json. `train` takes a strategy and user
networks (a `keras.Model` or a function, `setups.user_networks`), saved with the run so that
`sample`, `evaluate` and `export` need neither. Nothing is installed: the checkout is imported
from `sys.path` (a notebook elsewhere adds it with `sys.path.insert(0, CHECKOUT)`), since
top-level packages named `datasets` and `gan` would shadow other libraries.

This module imports TensorFlow only inside the functions that run a mode, so `run.py` checks
its flags through `run_config` before TensorFlow starts.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Mapping, TextIO

from trainers.config.flags import Config, ConfigError, declared, renamed
from trainers.config.record import read_run_record
from trainers.setups import registry, user_networks

if TYPE_CHECKING:
    import keras
    import tensorflow as tf

    from trainers.modes.export import Exported
    from trainers.modes.sample import Sampled

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
    checkpoint."""

    logdir: str
    step: int
    checkpoint: str | None


def train(config: Config, *, generator: keras.Model | Any = None, discriminator: keras.Model | Any = None,
          strategy: tf.distribute.Strategy | None = None, progress_stream: TextIO | None = None
          ) -> Trained:
    """Trains (or resumes) the run in `config.logdir`, as `run.py` does.

    `generator` and `discriminator` are a `keras.Model` (copied, weights included) or a
    function called like `--generator`'s (`user_networks`); the run records them as
    `instance:ClassName` or `module:function` and saves their architectures, so resuming with
    the same models continues exactly and sample/export need neither. `strategy` defaults to
    --strategy's.
    """
    from trainers.modes import train as train_mode
    networks = {role: network for role, network in (("generator", generator),
                                                    ("discriminator", discriminator))
                if network is not None}
    for role in networks:
        if getattr(config, role):
            raise ConfigError(f"--{role}={getattr(config, role)!r} and a {role} passed to train(): "
                              "give one of them.")
    if networks:
        labels = {role: user_networks.describe(network) for role, network in networks.items()}
        config = run_config({**config.as_dict(), **labels})
    prepare_runtime(config)
    with user_networks.supplied(networks):
        controller = train_mode.train(config, strategy=strategy, progress_stream=progress_stream)
    return Trained(logdir=config.logdir, step=controller.step,
                   checkpoint=controller.checkpoint_manager.latest_checkpoint)


def _mode_config(mode: str, logdir: str, flags: Mapping[str, Any]) -> Config:
    config = run_config({**flags, "mode": mode, "logdir": logdir})
    prepare_runtime(config)
    return config


def sample(logdir: str, **flags: Any) -> Sampled:
    """`--mode=sample` of the run in `logdir` (flags: output, num_samples, grid, seed, ...);
    returns the checkpoint used and the number of samples written to `output`."""
    from trainers.modes.sample import sample as sample_mode
    return sample_mode(_mode_config("sample", logdir, flags))


def evaluate(logdir: str, **flags: Any) -> dict[str, Any]:
    """`--mode=eval`: the metrics of a checkpoint of the run in `logdir`."""
    from trainers.modes.evaluate import evaluate as evaluate_mode
    return evaluate_mode(_mode_config("eval", logdir, flags))


def export(logdir: str, **flags: Any) -> Exported:
    """`--mode=export`: the run's generator as a SavedModel (or TFLite); returns where it went."""
    from trainers.modes.export import export as export_mode
    return export_mode(_mode_config("export", logdir, flags))
