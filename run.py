"""Gantry's command line: `python run.py [--flag=value ...]` or `--flagfile=FILE`.

Flags become a typed `Config`, which is resolved against the `--setup` preset and validated
before TensorFlow builds anything; then the chosen mode runs. Plain `python run.py` trains a
DCGAN on Fashion-MNIST in `runs/default` and resumes there when rerun.
"""

from __future__ import annotations

import errno
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app, flags, logging  # noqa: E402

from datasets.errors import DatasetError  # noqa: E402
from datasets.files import FileFault
from trainers.api import prepare_runtime, run_config
from trainers.config.flags import Config, ConfigError, declared, old_names, renamed
from trainers.engine.run_lock import refuse_if_training
from trainers.outputs.native_logs import quiet_native_logs
from trainers.setups import registry

_DEFINE = {bool: flags.DEFINE_boolean, int: flags.DEFINE_integer, float: flags.DEFINE_float,
           str: flags.DEFINE_string}


def _define_flags(runtime_choices: dict[str, tuple[str, ...]]) -> None:
    """One absl flag per declared flag (`trainers.config.flags`), with its type, default, help
    and choices, and one per old name (`Flag.renamed_from`), which `config_from_flags` maps to
    the new one with a notice.

    `runtime_choices` lists the values of a flag whose names are known only at run time: the
    `--setup` setups, from their registry. absl does not check choices: `validate` does, with one
    message shape.
    """
    for flag in declared().values():
        choices = flag.choices or runtime_choices.get(flag.name, ())
        help_text = flag.help + (f" One of: {', '.join(choices)}." if choices else "")
        _DEFINE[flag.type](flag.name, flag.default, help_text)
        for old in flag.renamed_from:
            _DEFINE[flag.type](old, None, f"The old name of --{flag.name}, still accepted.")


_define_flags(runtime_choices={"setup": registry.names()})
FLAGS = flags.FLAGS


def config_from_flags() -> Config:
    """The resolved, validated config of the flags given (`api.run_config`: a resumed training
    run keeps the preset values it started with, recorded in config.json); an old flag name
    works and prints its new name once."""
    given = {name: FLAGS[name].value for name in (*declared(), *old_names()) if FLAGS[name].present}
    return run_config(renamed(given))


# TensorFlow's errors for a file it could not write or read, as opposed to a bug.
_TENSORFLOW_FILE_ERRORS = ("PermissionDeniedError", "ResourceExhaustedError", "DataLossError",
                           "NotFoundError", "AlreadyExistsError")


def filesystem_fault(error: Exception, mode: str) -> str | None:
    """The message for a filesystem fault met while working (disk full, a path made unwritable
    or removed under a running job), which no flag check can foresee; None for anything else.
    A crash like this loses at most the cycles since the last checkpoint: checkpoints and
    records are only ever replaced whole."""
    if isinstance(error, OSError):
        what = f"{error.filename}: {error.strerror}" if error.filename else str(error)
    elif type(error).__name__ in _TENSORFLOW_FILE_ERRORS and "tensorflow" in type(error).__module__:
        what = str(error).strip().splitlines()[0]
    else:
        return None
    full = getattr(error, "errno", None) == errno.ENOSPC or "No space left" in str(error)
    hint = ("free some disk space" if full else "check that the path exists and is writable")
    return (f"{what}. A filesystem fault stopped --mode={mode}; {hint}, then rerun "
            "(training resumes from its last checkpoint).")


def directions(config: Config) -> str:
    """Where a finished training run left everything and what to run next."""
    from trainers.modes.train import FINAL_SAMPLES_FILE
    logdir = config.logdir
    samples = os.path.join(logdir, FINAL_SAMPLES_FILE)
    lines = [f"Run directory: {logdir}"]
    if os.path.exists(samples):
        lines.append(f"Samples:       {samples}")
    lines += [f"TensorBoard:   tensorboard --logdir {logdir}",
              f"Next:          python run.py --mode=sample --logdir={logdir} --output=more.png",
              f"               python run.py --mode=eval --logdir={logdir}",
              f"               python run.py --mode=export --logdir={logdir}"]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments {argv[1:]}; every option is a --flag.")
    if not FLAGS.tensorflow_logs:
        quiet_native_logs()  # before anything imports TensorFlow
    try:
        config = config_from_flags()
        if config.mode == "train" and config.strategy != "multi_worker":  # chief unknown yet
            refuse_if_training(config.logdir)
    except (ConfigError, FileFault) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    from trainers.engine.distribution import make_strategy
    from trainers.engine.controller import NonFiniteError
    from trainers.engine.preemption import RESTART_EXIT_CODE, Preempted
    try:
        prepare_runtime(config)
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
            stacking = loaded.record.get("per_channel_of")
            print(f"Trained the {loaded.record['dataset']} evaluator: test accuracy "
                  f"{loaded.record['test_accuracy']:.4f}, saved in {loaded.directory}"
                  + (f"; {stacking} classifies each channel with it" if stacking else ""))
        elif config.mode == "plot":
            from trainers.modes.plot import plot
            print(f"Wrote the training curves of {config.logdir} to {plot(config)}")
        else:
            # Created before any other TF op: MultiWorkerMirroredStrategy requires it.
            strategy = make_strategy(config.strategy, cpu_replicas=config.cpu_replicas)
            from trainers.modes.train import train
            train(config, strategy=strategy)
            print(directions(config))
    except (ConfigError, DatasetError, FileFault, NonFiniteError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except Preempted as stop:
        print(stop, file=sys.stderr, flush=True)
        return RESTART_EXIT_CODE
    except Exception as error:  # noqa: BLE001  only filesystem faults; anything else re-raised
        fault = filesystem_fault(error, config.mode)
        if fault is None:
            raise
        print(f"error: {fault}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    logging.set_verbosity(logging.WARNING)
    app.run(lambda argv: sys.exit(main(argv)))
