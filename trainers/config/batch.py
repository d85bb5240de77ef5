"""Whether a --batch_size suits the replicas and the data: checked once both are known,
before anything is built (pure Python, like the rest of `config`)."""

from __future__ import annotations

from trainers.config.flags import Config, ConfigError


def check_split(config: Config, replicas: int) -> None:
    """Refuses a --batch_size that does not split into one full batch per replica (each takes
    --batch_size / replicas examples: at least one, none left over), in whole --pack groups."""
    if config.batch_size % replicas:
        raise ConfigError(
            f"--batch_size={config.batch_size} is not divisible by the {replicas} replicas; use a "
            "multiple of it.")
    if (config.batch_size // replicas) % config.pack:
        raise ConfigError(
            f"--pack={config.pack}: each of the {replicas} replicas gets "
            f"{config.batch_size // replicas} examples, which do not split into packs of "
            f"{config.pack}; use a --batch_size that is a multiple of {config.pack * replicas}.")


def check_fits(config: Config, name: str, size: int | None, replicas: int) -> None:
    """Refuses a --batch_size larger than the `size` training examples of the data `name`
    (`Setup.training_sets`; None: endless or unknown, not checked).

    The pipeline (`datasets.pipeline`) repeats the shuffled examples before it batches them
    with drop_remainder=True, so no batch is ever short or empty and a larger batch does not
    fail there: it holds examples twice, and at sizes nobody means (--batch_size=100000000)
    it trains minutes before a tensor overflows. Within the size, each replica's share (split
    by `check_split`) is within the examples its input pipeline reads (1/workers of the
    data), and no pipeline is empty; so a set smaller than the smallest batch that splits over
    the replicas fits no --batch_size at all.
    """
    if size is None or config.batch_size <= size:
        return
    smallest = replicas * config.pack
    largest = size // smallest * smallest
    if largest:
        fix = f"use --batch_size={largest} or less"
    else:
        share = "one example" if config.pack == 1 else f"a pack of {config.pack} (--pack)"
        fix = (f"no batch fits, as each of the {replicas} replicas needs {share} of its own: "
               "train on fewer replicas (--cpu_replicas, workers) or on more data")
    raise ConfigError(
        f"--batch_size={config.batch_size} is larger than the training set: {name} has {size} "
        f"example{'s' if size != 1 else ''}, and a larger batch would hold some twice; {fix}.")
