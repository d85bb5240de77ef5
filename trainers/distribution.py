"""Choosing the `tf.distribute` strategy, including several replicas on a CPU-only machine.

`--cpu_replicas=N` splits the host CPU into N logical devices so that `MirroredStrategy`
runs, and is tested, without a GPU. The split must happen before TensorFlow initialises its
devices, which is why `configure_cpu_replicas` is called first thing by `run.py` and tests.
"""

from __future__ import annotations

import functools

import tensorflow as tf

from trainers.config import STRATEGIES


def configure_cpu_replicas(count: int) -> None:
    """Splits the first CPU into `count` logical devices (no-op when already split so)."""
    if count < 1:
        raise ValueError(f"--cpu_replicas={count} must be >= 1.")
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
        raise ValueError(
            f"--cpu_replicas={count} but only {len(names)} logical CPU devices exist; "
            "configure_cpu_replicas must run before TensorFlow initialises its devices.")
    return names[:count]


def make_strategy(name: str, *, cpu_replicas: int = 1) -> tf.distribute.Strategy:
    """The strategy for `--strategy`.

    auto: mirrored over all GPUs when there are several, one_device on a single GPU, mirrored
    over logical CPUs when `cpu_replicas` > 1, otherwise the default strategy.
    """
    if name not in STRATEGIES:
        raise ValueError(f"--strategy={name!r} is not one of {', '.join(STRATEGIES)}.")
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
            raise ValueError(
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
