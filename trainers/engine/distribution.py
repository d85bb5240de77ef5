"""Choosing the `tf.distribute` strategy, including several replicas on a CPU-only machine.

`--cpu_replicas=N` splits the host CPU into N logical devices so that `MirroredStrategy`
runs, and is tested, without a GPU. The split must happen before TensorFlow initialises its
devices, which is why `configure_cpu_replicas` is called first thing by `run.py` and tests.
`--strategy=multi_worker` is TensorFlow's own `MultiWorkerMirroredStrategy`, configured by the
`TF_CONFIG` environment variable; it too must be created before any other TensorFlow op.
"""

from __future__ import annotations

import functools
import json
import os

import tensorflow as tf

from trainers.config.flags import ConfigError
from trainers.engine.flags import STRATEGIES


def configure_cpu_replicas(count: int) -> None:
    """Splits the first CPU into `count` logical devices (no-op when already split so)."""
    if count < 1:
        raise ConfigError(f"--cpu_replicas={count} must be >= 1.")
    cpu = tf.config.list_physical_devices("CPU")[0]
    current = tf.config.get_logical_device_configuration(cpu)
    if current is not None and len(current) >= count:
        return
    if count == 1 and current is None:
        return
    try:
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(count)])
    except RuntimeError as error:
        raise RuntimeError(
            f"--cpu_replicas={count}: TensorFlow's devices were initialised before the CPU could "
            "be split; call configure_cpu_replicas before any other TensorFlow op.") from error


def _cpu_devices(count: int) -> list[str]:
    names = [d.name for d in tf.config.list_logical_devices("CPU")]
    if len(names) < count:
        raise ConfigError(
            f"--cpu_replicas={count} but only {len(names)} logical CPU devices exist; "
            "configure_cpu_replicas must run before TensorFlow initialises its devices.")
    return names[:count]


def make_strategy(name: str, *, cpu_replicas: int = 1) -> tf.distribute.Strategy:
    """The strategy for `--strategy`.

    auto: mirrored over all GPUs when there are several, one_device on a single GPU, mirrored
    over logical CPUs when `cpu_replicas` > 1, otherwise the default strategy.
    """
    if name not in STRATEGIES:
        raise ConfigError(f"--strategy={name!r} is not one of {', '.join(STRATEGIES)}.")
    if name == "multi_worker":
        return _multi_worker(check_tf_config())
    gpus = [d.name for d in tf.config.list_logical_devices("GPU")]
    if name == "auto":
        if len(gpus) > 1:
            name = "mirrored"
        elif gpus:
            name = "one_device"
        elif cpu_replicas > 1:
            name = "mirrored"
        else:
            name = "default"
    if name == "default":
        if cpu_replicas > 1:
            raise ConfigError(
                f"--strategy=default runs one replica but --cpu_replicas={cpu_replicas}; "
                "use --strategy=mirrored (or auto) for several replicas.")
        return tf.distribute.get_strategy()
    if name == "one_device":
        return tf.distribute.OneDeviceStrategy(gpus[0] if gpus else _cpu_devices(1)[0])
    return _mirrored(tuple(gpus if gpus else _cpu_devices(cpu_replicas)))


@functools.lru_cache(maxsize=None)
def _mirrored(devices: tuple[str, ...]) -> tf.distribute.MirroredStrategy:
    """One MirroredStrategy per device set for the whole process.

    Every MirroredStrategy instance numbers its collective ops from the same key, so a second
    instance over the same devices (a second model in a notebook, a second test) collides with
    the first; reusing the instance is safe because a strategy holds no model state.
    """
    return tf.distribute.MirroredStrategy(list(devices))


def check_tf_config() -> str:
    """The TF_CONFIG of a multi-worker job, checked enough to fail with a useful message."""
    raw = os.environ.get("TF_CONFIG", "")
    example = ('TF_CONFIG=\'{"cluster": {"worker": ["host1:2222", "host2:2222"]}, '
               '"task": {"type": "worker", "index": 0}}\'')
    try:
        parsed = json.loads(raw) if raw else None
    except json.JSONDecodeError as error:
        raise ConfigError(f"--strategy=multi_worker: TF_CONFIG is not JSON ({error}); e.g. {example}") from None
    if not parsed or "cluster" not in parsed or "task" not in parsed:
        raise ConfigError("--strategy=multi_worker needs the environment variable TF_CONFIG with a "
                         f"'cluster' and this process's 'task', e.g. {example} (see docs/several-machines.md).")
    return raw


@functools.lru_cache(maxsize=None)
def _multi_worker(tf_config: str) -> tf.distribute.MultiWorkerMirroredStrategy:
    """One MultiWorkerMirroredStrategy per process (it owns the process's collective runtime)."""
    del tf_config  # the cache key: the strategy reads TF_CONFIG itself
    return tf.distribute.MultiWorkerMirroredStrategy()


def worker_role(strategy: tf.distribute.Strategy) -> tuple[bool, int]:
    """(is this process the chief, its worker index); (True, 0) without a cluster."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.cluster_spec().as_dict():
        return True, 0
    task_type, task_id = resolver.task_type, resolver.task_id or 0
    has_chief = "chief" in resolver.cluster_spec().as_dict()
    is_chief = task_type == "chief" or (task_type == "worker" and task_id == 0 and not has_chief)
    return is_chief, task_id
