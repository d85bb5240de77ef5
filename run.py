"""Gantry's command line: `python run.py [--flag=value ...]` or `--flagfile=FILE`.

Flags become a typed `Config`, which is resolved against the `--gan` preset and validated
before TensorFlow builds anything; then the chosen mode runs. Plain `python run.py` trains a
DCGAN on Fashion-MNIST in `runs/default` and resumes there when rerun.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import typing

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app, flags, logging  # noqa: E402

from datasets.errors import DatasetError  # noqa: E402
from trainers.config.fields import Config, ConfigError
from trainers.config.record import read_run_record
from trainers.setups import registry

_DEFINE = {bool: flags.DEFINE_boolean, int: flags.DEFINE_integer, float: flags.DEFINE_float,
           str: flags.DEFINE_string}


def _define_flags(runtime_choices: dict[str, tuple[str, ...]]) -> None:
    """One absl flag per Config field, all from the field: its type from the annotation (`T` or
    `T | None`), its help and choices from the metadata (`trainers.config.fields.field`).

    `runtime_choices` lists the values of a field whose names are known only at run time: the
    `--gan` setups, from their registry. absl does not check choices: `validate` does, with one
    message shape.
    """
    types = typing.get_type_hints(Config)
    for field in dataclasses.fields(Config):
        value_type, = set(typing.get_args(types[field.name]) or (types[field.name],)) - {type(None)}
        choices = field.metadata["choices"] or runtime_choices.get(field.name, ())
        help_text = field.metadata["help"] + (f" One of: {', '.join(choices)}." if choices else "")
        _DEFINE[value_type](field.name, field.default, help_text)


_define_flags(runtime_choices={"gan": registry.names()})
FLAGS = flags.FLAGS


def config_from_flags() -> Config:
    """The resolved, validated config of the parsed flags."""
    values = {field.name: FLAGS[field.name].value for field in dataclasses.fields(Config)}
    config = Config(**values)
    # A resumed training run keeps the preset values it started with (config.json).
    recorded = read_run_record(config.logdir) if config.mode == "train" else None
    return registry.resolve(config, recorded)


def main(argv: list[str]) -> int:
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments {argv[1:]}; every option is a --flag.")
    try:
        config = config_from_flags()
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    from trainers.engine.distribution import configure_cpu_replicas, make_strategy
    from trainers.engine.preemption import RESTART_EXIT_CODE, Preempted
    try:
        configure_cpu_replicas(config.cpu_replicas)
        if config.deterministic:
            import tensorflow as tf
            tf.config.experimental.enable_op_determinism()
        if config.mode == "sample":
            from trainers.modes.sample import sample
            sampled = sample(config)
            print(f"Wrote {sampled.count} samples from {sampled.checkpoint} to {config.output}")
        elif config.mode == "export":
            from trainers.modes.export import export
            exported = export(config)
            sizes = ", ".join(f"{name} {size / 1024:.1f} KiB" for name, size in exported.sizes.items())
            print(f"Exported {exported.generator} of {exported.checkpoint} (step {exported.step}) "
                  f"to {exported.path} ({sizes})")
        elif config.mode == "eval":
            import json
            from trainers.modes.evaluate import evaluate
            print(json.dumps(evaluate(config), sort_keys=True))
        elif config.mode == "train_evaluator":
            from trainers.modes.train_evaluator import train_domain_evaluator
            loaded = train_domain_evaluator(config)
            print(f"Trained the {config.dataset} evaluator: test accuracy "
                  f"{loaded.record['test_accuracy']:.4f}, saved in {loaded.directory}")
        elif config.mode == "plot":
            from trainers.modes.plot import plot
            print(f"Wrote the training curves of {config.logdir} to {plot(config)}")
        else:
            # Created before any other TF op: MultiWorkerMirroredStrategy requires it.
            strategy = make_strategy(config.strategy, cpu_replicas=config.cpu_replicas)
            from trainers.modes.train import train
            train(config, strategy=strategy)
    except (ConfigError, DatasetError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except Preempted as stop:
        print(stop, file=sys.stderr, flush=True)
        return RESTART_EXIT_CODE
    return 0


if __name__ == "__main__":
    logging.set_verbosity(logging.WARNING)
    app.run(lambda argv: sys.exit(main(argv)))
