"""Native bfloat16 detection on sample devices, and what --precision=auto/mixed_bfloat16 print."""

import pytest

from trainers.engine.hardware import native_bfloat16, resolve_precision

AVX2_ONLY = "processor\t: 0\nflags\t\t: fpu sse2 avx avx2 fma avx512f\nmodel name\t: x\n"
SAPPHIRE_RAPIDS = "processor\t: 0\nflags\t\t: fpu avx2 avx512f avx512_bf16 amx_bf16 amx_tile\n"
COOPER_LAKE = "flags\t\t: avx2 avx512_bf16\n"
AMX_ONLY = "flags\t\t: avx2 amx_bf16\n"


@pytest.mark.parametrize("cpuinfo, native", [
    (AVX2_ONLY, False), (SAPPHIRE_RAPIDS, True), (COOPER_LAKE, True), (AMX_ONLY, True),
    ("", False), ("model name\t: avx512_bf16 in the name, not a flag\n", False),
])
def test_cpu_flags_decide_without_accelerators(cpuinfo, native):
    assert native_bfloat16(cpuinfo=cpuinfo) is native


def test_gpus_decide_by_compute_capability_and_a_tpu_always_has_it():
    ampere, volta = {"compute_capability": (8, 0)}, {"compute_capability": (7, 0)}
    assert native_bfloat16(cpuinfo=AVX2_ONLY, gpu_details=[ampere])
    assert not native_bfloat16(cpuinfo=SAPPHIRE_RAPIDS, gpu_details=[volta])
    assert not native_bfloat16(cpuinfo="", gpu_details=[ampere, volta])
    assert not native_bfloat16(cpuinfo="", gpu_details=[{}])  # no capability reported
    assert native_bfloat16(cpuinfo=AVX2_ONLY, tpu=True)


def test_auto_picks_bfloat16_only_where_native_and_says_so():
    assert resolve_precision("auto", native=True) == (
        "mixed_bfloat16", "--precision=auto: mixed_bfloat16 (the hardware computes bfloat16).")
    assert resolve_precision("auto", native=False) == (
        "float32", "--precision=auto: float32 (the hardware has no native bfloat16).")


def test_emulated_bfloat16_gets_one_warning_naming_the_slowdown():
    precision, line = resolve_precision("mixed_bfloat16", native=False)
    assert precision == "mixed_bfloat16"
    assert line.startswith("Warning: --precision=mixed_bfloat16") and "0.13x" in line
    assert "\n" not in line
    assert resolve_precision("mixed_bfloat16", native=True) == ("mixed_bfloat16", None)
    assert resolve_precision("float32", native=False) == ("float32", None)
