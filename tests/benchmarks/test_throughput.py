"""`benchmarks/throughput.py`: the performance report runs without allocator statistics.

TensorFlow's default CPU allocator keeps no statistics (only TF_CPU_ALLOCATOR_USE_BFC=true
does), which used to crash the report at its first case; it now measures memory with
`MemoryProbe`'s fallbacks. The end-to-end test runs the smallest meaningful `--quick` report
(two toy cases, ~20-40 s on 2 CPU cores) as a subprocess and rebuilds it from its JSON; the
unit tests check the probe's choice of measure and the report's memory columns in-process.
"""

import json
import os
import subprocess
import sys
import types

import pytest
import tensorflow as tf

from benchmarks import throughput, throughput_report
from tests.cli import ENV, ROOT

LINUX = sys.platform.startswith("linux")
SMALLEST = ["--quick", "--models", "toy", "--loops", "fused,simultaneous", "--precisions",
            "float32", "--xla", "off", "--replicas", "1", "--warmup", "1"]
ROWS = ("fused step, tf.range loop", "gantry trainer, --update_order=simultaneous")


@pytest.fixture(scope="module")
def quick_report(tmp_path_factory):
    """The report's stdout and JSON, from a process whose CPU allocator keeps no statistics.

    TensorFlow's plain CPU allocator keeps none unless TF_CPU_ALLOCATOR_USE_BFC is set, but with
    oneDNN's optimizations on (the default on CPUs with AVX-512) the CPU allocator is a BFC one
    that does: both are turned off here, so the fallback is tested on every CPU.
    """
    directory = tmp_path_factory.mktemp("throughput")
    env = {k: v for k, v in ENV.items() if k != "TF_CPU_ALLOCATOR_USE_BFC"}
    env["TF_ENABLE_ONEDNN_OPTS"] = "0"
    path = directory / "throughput.json"
    result = subprocess.run(
        [sys.executable, os.path.join(ROOT, "benchmarks", "throughput.py"), *SMALLEST,
         f"--json={path}"],
        cwd=directory, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    with open(path) as file:
        return result.stdout, json.load(file)


def table(stdout: str) -> tuple[list[str], dict[str, list[str]]]:
    """The toy's case table: its header cells and its rows' cells by case name."""
    lines = [line for line in stdout.splitlines() if line.startswith("| ")]
    header = next(line for line in lines if line.startswith("| case |"))
    cells = lambda line: [cell.strip() for cell in line.strip("|").split("|")]  # noqa: E731
    rows = {cells(line)[0]: cells(line) for line in lines if cells(line)[0] in ROWS}
    return cells(header), rows


def test_quick_report_runs_without_allocator_statistics(quick_report):
    stdout, record = quick_report
    header, rows = table(stdout)
    assert set(rows) == set(ROWS), stdout[-3000:]
    assert all(row[5] and float(row[5]) > 0 for row in rows.values())  # images/s
    measure = record["settings"]["memory_measure"]
    assert measure in throughput.MEMORY_MEASURES and measure != "allocator"
    assert f"Memory measure: {measure}" in stdout
    labels = throughput.MemoryProbe.LABELS[measure]
    assert header[-2:] == list(labels)
    assert record["settings"]["memory_columns"] == dict(zip(throughput.MEMORY_FIELDS, labels))
    assert any(note.startswith("Memory: ") for note in record["notes"])
    assert len(record["results"]) == 2 and not any(r["error"] for r in record["results"])
    if LINUX:  # /proc/self/clear_refs lets VmHWM be reset per case
        assert measure == "rss" and header[-2:] == ["held RSS MiB", "step peak RSS MiB"]
        assert record["settings"]["process_peak_rss_mib"] > 100  # TF alone is more
        for result in record["results"]:
            row = rows[throughput_report.LOOP_TITLES[result["loop"]]]
            # the table rounds the record's figures to 0.1 MiB (18.75 prints as 18.8, which a
            # tolerance of 0.05 refused by a float's last bit)
            assert [row[-2], row[-1]] == [f"{result['held_mib']:.1f}",
                                          f"{result['step_peak_mib']:.1f}"]
            # What the toy's timed calls added to the RSS, not the process's peak; RSS counters
            # are approximate to a few hundred KiB, so an increment of ~0 may read below it.
            assert -1 < result["step_peak_mib"] < 100


def test_quick_report_is_rebuilt_from_its_json_alone(quick_report):
    stdout, record = quick_report
    specs = {name: types.SimpleNamespace(**workload)
             for name, workload in record["settings"]["workloads"].items()}
    rebuilt = throughput_report.markdown(
        results=record["results"], targets=record["targets"], notes=record["notes"],
        peaks=record["matmul_peak_flops"], self_check=record["self_check"],
        settings=record["settings"], specs=specs)
    assert rebuilt in stdout


@pytest.fixture
def no_allocator_stats(monkeypatch):
    def unavailable(device):
        raise ValueError(f"Allocator stats not available for device '{device}'")
    monkeypatch.setattr(tf.config.experimental, "get_memory_info", unavailable)


def test_probe_uses_the_allocator_when_it_keeps_statistics(monkeypatch):
    stats = {"current": 10 * 2 ** 20, "peak": 10 * 2 ** 20}
    monkeypatch.setattr(tf.config.experimental, "get_memory_info", lambda device: dict(stats))
    monkeypatch.setattr(tf.config.experimental, "reset_memory_stats", lambda device: None)
    probe = throughput.MemoryProbe("CPU:0")
    assert probe.measure == "allocator" and "allocator" in probe.labels[1]
    baseline = probe.start_peak()
    stats["peak"] = 25 * 2 ** 20
    assert probe.step_peak(baseline) == 15 * 2 ** 20  # on top of what was live


@pytest.mark.skipif(not LINUX, reason="/proc/self/status and clear_refs are Linux")
def test_probe_falls_back_to_resettable_rss(no_allocator_stats):
    probe = throughput.MemoryProbe("CPU:0")
    assert probe.measure == "rss"
    baseline = probe.start_peak()
    block = bytearray(64 * 2 ** 20)  # touched: 64 MiB more resident
    for i in range(0, len(block), 4096):
        block[i] = 1
    peak = probe.step_peak(baseline)
    del block
    assert 60 * 2 ** 20 <= peak < 96 * 2 ** 20  # the block, not the process's whole RSS
    assert probe.step_peak(probe.start_peak()) < 60 * 2 ** 20  # the mark starts again


@pytest.mark.skipif(not LINUX, reason="/proc/self/status is Linux")
def test_probe_falls_back_to_the_process_peak_so_far(no_allocator_stats, monkeypatch, tmp_path):
    monkeypatch.setattr(throughput, "PROC_CLEAR_REFS", str(tmp_path / "missing" / "clear_refs"))
    probe = throughput.MemoryProbe("CPU:0")
    assert probe.measure == "rss_so_far" and "so far" in probe.labels[1]
    assert probe.step_peak(probe.start_peak()) == throughput.MemoryProbe.process_peak_rss() > 0
    assert probe.current() > 0


def test_probe_without_any_measure_reports_none(no_allocator_stats, monkeypatch, tmp_path):
    monkeypatch.setattr(throughput, "PROC_STATUS", str(tmp_path / "missing"))
    monkeypatch.setattr(throughput, "resource", None)
    probe = throughput.MemoryProbe("CPU:0")
    assert probe.measure == "none"
    assert probe.current() is None and probe.step_peak(probe.start_peak()) is None
    assert probe.process_peak_rss() is None


@pytest.mark.parametrize("measure", throughput.MEMORY_MEASURES)
def test_report_names_memory_columns_after_the_measure(measure):
    """The headers come from settings.memory_columns; a figure the measure lacks reads n/a."""
    labels = throughput.MemoryProbe.LABELS[measure]
    figures = (None, None) if measure == "none" else (12.34, 5.67)
    result = {"model": "toy", "loop": "fused", "materialised": False, "precision": "float32",
              "xla": False, "replicas": 1, "cycles_per_loop": 20, "data": "ring8", "error": None,
              "images_per_second": 1000.0, "repeat_images_per_second": [1000.0],
              "repeat_cpu_ms_per_image": [0.1], "images_per_cycle": 64, "flops_per_cycle": 1e6,
              **dict(zip(throughput.MEMORY_FIELDS, figures))}
    spec = types.SimpleNamespace(title="MLP pair", width=None, batch_size=64, cycles=40, many=20)
    peaks = {"float32": 1e10}
    throughput_report.add_derived([result], peaks)
    text = throughput_report.markdown(
        results=[result], targets=[], notes=[], peaks=peaks,
        self_check={"counted": {}, "hand": {}, "batch_size": 16, "ok": True},
        settings={"tensorflow": "x", "keras": "x", "cpu_count": 2, "devices": ["CPU:0"],
                  "repeats": 1, "seconds": 1.0, "matmul_size": 512,
                  "process_peak_rss_mib": None if measure == "none" else 700.0,
                  "memory_columns": dict(zip(throughput.MEMORY_FIELDS, labels))},
        specs={"toy": spec})
    header, rows = table(text)
    assert header[-2:] == list(labels)
    assert rows[ROWS[0]][-2:] == (["n/a", "n/a"] if measure == "none" else ["12.3", "5.7"])
    assert len(rows[ROWS[0]]) == len(header)
    assert ("process peak RSS n/a MiB" if measure == "none" else "process peak RSS 700 MiB") in text
