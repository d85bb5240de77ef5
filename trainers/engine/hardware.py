"""Whether the hardware computes bfloat16 natively: decides `--precision=auto` and warns about
`--precision=mixed_bfloat16` where it is emulated.

Native: a TPU, GPUs of compute capability 8.0 or more, or (no accelerator) a CPU with the
avx512_bf16 or amx_bf16 flag. Elsewhere every bfloat16 op is emulated: benchmarks/throughput.py
measured mixed_bfloat16 at 0.13x the float32 speed on an AVX2-only CPU. `native_bfloat16` is
pure (it takes the cpuinfo text and the device details), `detect` reads this host.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import tensorflow as tf

BFLOAT16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")
EMULATED_SPEED = 0.13  # mixed_bfloat16 / float32 images per second, AVX2-only CPU


def native_bfloat16(*, cpuinfo: str, gpu_details: Sequence[Mapping[str, Any]] = (),
                    tpu: bool = False) -> bool:
    """Whether training computes bfloat16 natively on the devices described.

    `cpuinfo` is the text of /proc/cpuinfo, `gpu_details` one
    `tf.config.experimental.get_device_details` dict per GPU (training runs on the GPUs when
    there are any, so the CPU then does not count).
    """
    if tpu:
        return True
    if gpu_details:
        return all(tuple(d.get("compute_capability") or (0, 0)) >= (8, 0) for d in gpu_details)
    flags = set()
    for line in cpuinfo.splitlines():
        name, _, value = line.partition(":")
        if name.strip() == "flags":
            flags.update(value.split())
    return any(flag in flags for flag in BFLOAT16_CPU_FLAGS)


def detect() -> bool:
    """`native_bfloat16` of this host's devices."""
    try:
        with open("/proc/cpuinfo") as handle:
            cpuinfo = handle.read()
    except OSError:  # not Linux: no CPU flags to read
        cpuinfo = ""
    gpus = [tf.config.experimental.get_device_details(gpu)
            for gpu in tf.config.list_physical_devices("GPU")]
    return native_bfloat16(cpuinfo=cpuinfo, gpu_details=gpus,
                           tpu=bool(tf.config.list_physical_devices("TPU")))


def resolve_precision(requested: str, *, native: bool) -> tuple[str, str | None]:
    """The `--precision` to train with, and the one line to print about it (None: none)."""
    if requested == "auto":
        chosen = "mixed_bfloat16" if native else "float32"
        has = "computes" if native else "has no native"
        return chosen, f"--precision=auto: {chosen} (the hardware {has} bfloat16)."
    if requested == "mixed_bfloat16" and not native:
        return requested, (
            "Warning: --precision=mixed_bfloat16 without native bfloat16 (no avx512_bf16 or "
            "amx_bf16 CPU flag, no GPU of compute capability 8.0+, no TPU) is emulated, about "
            f"{EMULATED_SPEED:g}x the float32 speed; use --precision=float32 or auto.")
    return requested, None
