"""Derived columns, the issue's targets and the markdown report of `throughput.py`.

Pure functions over the result dicts `throughput.measure` returns (one per case: its settings,
`images_per_second`, `images_per_cycle`, `flops_per_cycle`, `held_mib`, `step_peak_mib`, or
`error`), so the report can be rebuilt from the JSON file. The memory figures' meaning depends
on the measure the run could use, so their column headers come from the run's settings
(`memory_columns`), and a figure that measure could not give (None) prints as n/a.
"""

from __future__ import annotations

import statistics

TARGET_FLOPS_VS_FUSED = 0.95
TARGET_SIMULTANEOUS_VS_FUSED = 0.97
TARGET_TOY_LOOP_SPEEDUP = 3.0
TARGET_INPUT_WAIT = 0.02
MIXED_HELPS = 1.05  # a speed-up below this is within run-to-run noise on a shared machine

LOOP_TITLES = {
    "tutorial": "fused step, Python loop (tutorial)",
    "fused": "fused step, tf.range loop",
    "alternating": "alternating D then G step, tf.range loop",
    "trainer": "gantry trainer, dcgan preset (k=1)",
    "simultaneous": "gantry trainer, --update_order=simultaneous",
    "lazy": "gantry trainer + a lazy R1 phase that is not due",
}


def describe(result: dict) -> str:
    """One line naming a case."""
    data = ", data pre-materialised" if result["materialised"] else ""
    return (f"{result['model']}: {LOOP_TITLES[result['loop']]}{data}, {result['precision']}, "
            f"XLA {'on' if result['xla'] else 'off'}, {result['replicas']} replica(s), "
            f"steps/loop {result['cycles_per_loop']}")


def _ok(result: dict) -> bool:
    return not result["error"] and "images_per_second" in result


def _settings(result: dict) -> tuple:
    return (result["model"], result["cycles_per_loop"], result["precision"], result["xla"],
            result["replicas"])


def add_derived(results: list[dict], peaks: dict[str, float]) -> None:
    """Adds achieved FLOP/s, its fraction of the matmul peak of the case's precision, and
    images/s and FLOP/s relative to the fused `tf.range` case of equal settings."""
    for result in results:
        if _ok(result):
            cycles_per_second = result["images_per_second"] / result["images_per_cycle"]
            result["flops_per_second"] = result["flops_per_cycle"] * cycles_per_second
            result["peak_fraction"] = result["flops_per_second"] / peaks[result["precision"]]
    fused = {_settings(r): r for r in results
             if _ok(r) and r["loop"] == "fused" and not r["materialised"]}
    for result in results:
        same = fused.get(_settings(result))
        if _ok(result) and same is not None:
            result["images_vs_fused"] = result["images_per_second"] / same["images_per_second"]
            result["flops_vs_fused"] = result["flops_per_second"] / same["flops_per_second"]


def paired_ratio(a: dict | None, b: dict | None) -> float | None:
    """Median over timing rounds of a's images/s over b's in the same round: both ran within
    seconds of each other, so load that comes and goes cancels out of the ratio."""
    if a is None or b is None:
        return None
    return statistics.median(
        x / y for x, y in zip(a["repeat_images_per_second"], b["repeat_images_per_second"]))


def paired_cpu_ratio(a: dict | None, b: dict | None) -> float | None:
    """Like `paired_ratio`, from CPU time per image (b's over a's: above 1, a costs less)."""
    if a is None or b is None or "repeat_cpu_ms_per_image" not in a:
        return None
    return statistics.median(
        y / x for x, y in zip(a["repeat_cpu_ms_per_image"], b["repeat_cpu_ms_per_image"]))


def _find(results: list[dict], **wanted) -> dict | None:
    for result in results:
        if _ok(result) and all(result[key] == value for key, value in wanted.items()):
            return result
    return None


def _reference(results: list[dict], model: str) -> dict | None:
    """The settings of a workload's reference trainer case (the first looped trainer case)."""
    trainer = next((r for r in results if r["model"] == model and r["loop"] == "trainer"
                    and not r["materialised"] and r["cycles_per_loop"] > 1), None)
    if trainer is None:
        return None
    return {key: trainer[key] for key in ("precision", "xla", "replicas", "cycles_per_loop")}


def _target(target: str, model: str, value: float | None, measured: str, passed: bool | None):
    status = "n/a" if value is None else "INFO" if passed is None else "PASS" if passed else "FAIL"
    return {"target": target, "model": model, "value": value,
            "measured": measured if value is not None else "not measured", "status": status}


def targets(results: list[dict], specs: dict) -> list[dict]:
    """The issue's targets, at each workload's reference settings, from paired ratios."""
    rows = []
    models = list(dict.fromkeys(r["model"] for r in results))
    for model in models:
        reference = _reference(results, model)
        if reference is None:
            continue
        trainer = _find(results, model=model, loop="trainer", materialised=False, **reference)
        fused = _find(results, model=model, loop="fused", materialised=False, **reference)
        speed = paired_ratio(trainer, fused)
        # FLOP/s ratio = images/s ratio x the ratio of FLOPs per image.
        value = (speed * (trainer["flops_per_cycle"] / trainer["images_per_cycle"])
                 / (fused["flops_per_cycle"] / fused["images_per_cycle"])
                 if speed is not None else None)
        rows.append(_target(
            f"trainer's achieved FLOP/s >= {TARGET_FLOPS_VS_FUSED:.0%} of the fused loop's",
            model, value, f"{value:.1%}" if value is not None else "",
            value is not None and value >= TARGET_FLOPS_VS_FUSED))
        simultaneous = _find(results, model=model, loop="simultaneous", materialised=False,
                             **reference)
        speed = paired_ratio(simultaneous, fused)
        work = paired_cpu_ratio(simultaneous, fused)
        rows.append(_target(
            f"trainer (simultaneous order) images/s >= {TARGET_SIMULTANEOUS_VS_FUSED:.0%} of the "
            "fused loop's", model, speed,
            f"{speed:.1%}" + (f" (by CPU time per image: {work:.1%})" if work else "")
            if speed is not None else "",
            speed is not None and speed >= TARGET_SIMULTANEOUS_VS_FUSED))
        lazy = _find(results, model=model, loop="lazy", materialised=False, **reference)
        cost, lazy_work = paired_ratio(lazy, trainer), paired_cpu_ratio(lazy, trainer)
        rows.append(_target(
            "trainer with a lazy phase that is not due vs without (images/s)", model, cost,
            f"{cost:.1%}" + (f" (by CPU time per image: {lazy_work:.1%})" if lazy_work else "")
            if cost is not None else "", None))
        materialised = _find(results, model=model, loop="trainer", materialised=True, **reference)
        ratio = paired_ratio(trainer, materialised)
        wait = 1 - ratio if ratio is not None else None
        rows.append(_target(f"input waiting < {TARGET_INPUT_WAIT:.0%} of step time (trainer)",
                            model, wait, f"{wait:+.1%}" if wait is not None else "",
                            wait is not None and wait < TARGET_INPUT_WAIT))
    reference = _reference(results, "toy")
    if reference is not None:
        settings = {key: reference[key] for key in ("precision", "xla", "replicas")}
        many = _find(results, model="toy", loop="trainer", materialised=False, **reference)
        one = _find(results, model="toy", loop="trainer", materialised=False, cycles_per_loop=1,
                    **settings)
        speedup = paired_ratio(many, one)
        rows.append(_target(
            f"toy: {TARGET_TOY_LOOP_SPEEDUP:.0f}x faster with {specs['toy'].many} steps/loop "
            "than with 1 (trainer)", "toy", speedup,
            f"{speedup:.2f}x" if speedup is not None else "",
            speedup is not None and speedup >= TARGET_TOY_LOOP_SPEEDUP))
    for model in models:
        reference = _reference(results, model)
        if reference is None or reference["precision"] != "float32":
            continue
        for loop in ("fused", "trainer"):
            base = _find(results, model=model, loop=loop, materialised=False, **reference)
            mixed = _find(results, model=model, loop=loop, materialised=False,
                          **{**reference, "precision": "mixed_bfloat16"})
            gain = paired_ratio(mixed, base)
            verdict = "helps" if gain is not None and gain >= MIXED_HELPS else "no gain"
            rows.append(_target(f"mixed_bfloat16 vs float32 images/s ({LOOP_TITLES[loop]})",
                                model, gain, f"{gain:.2f}x: {verdict}" if gain is not None else "",
                                None))
    return rows


def time_split(results: list[dict]) -> list[str]:
    """Per workload, at its reference settings: what each step from the fused loop to the
    trainer as users run it costs, as paired images/s ratios."""
    lines = []
    for model in dict.fromkeys(r["model"] for r in results):
        reference = _reference(results, model)
        if reference is None:
            continue
        pick = lambda loop, **extra: _find(  # noqa: E731
            results, model=model, loop=loop, **{"materialised": False, **reference, **extra})
        steps = [
            ("alternating instead of fused (a second generator pass)", pick("alternating"),
             pick("fused")),
            ("the trainer in simultaneous order instead of the fused loop",
             pick("simultaneous"), pick("fused")),
            ("the trainer's machinery", pick("trainer"), pick("alternating")),
            ("a lazy phase on the cycles it does not run", pick("lazy"), pick("trainer")),
            ("the real input pipeline", pick("trainer"), pick("trainer", materialised=True)),
            ("one call per cycle instead of a loop", pick("trainer", cycles_per_loop=1),
             pick("trainer")),
        ]
        parts = [f"{label} x{paired_ratio(a, b):.2f}" for label, a, b in steps
                 if paired_ratio(a, b) is not None]
        if parts:
            lines.append(f"- {model}: " + "; ".join(parts) + ".")
    return lines


def slowest_paths(results: list[dict]) -> list[str]:
    """Per workload: the slowest measured case against the fastest."""
    lines = []
    for model in dict.fromkeys(r["model"] for r in results):
        measured = [r for r in results if r["model"] == model and _ok(r)]
        if not measured:
            continue
        slow = min(measured, key=lambda r: r["images_per_second"])
        fast = max(measured, key=lambda r: r["images_per_second"])
        lines.append(f"- {model}: slowest is {describe(slow)} at "
                     f"{slow['images_per_second']:.0f} images/s, "
                     f"{slow['images_per_second'] / fast['images_per_second']:.2f}x the fastest "
                     f"({describe(fast).split(': ', 1)[1]}).")
    return lines


def cpu_ms_per_image(result: dict) -> float | None:
    """Median CPU milliseconds per image over the repeats (None in reports without it)."""
    values = result.get("repeat_cpu_ms_per_image")
    return statistics.median(values) if values else None


def _number(value, spec: str, missing: str = "-") -> str:
    """`value` formatted, or `missing`: "-" where a comparison has no reference case, "n/a"
    where the run's memory measure could not give a figure."""
    return missing if value is None else format(value, spec)


def _case_table(rows: list[dict], memory_columns: dict[str, str]) -> list[str]:
    """The cases of one workload; `memory_columns` maps each memory field of a result to its
    column header."""
    lines = ["| case | precision | XLA | replicas | steps/loop | images/s | vs fused "
             "| CPU ms/image | GFLOP/cycle | GFLOP/s | % of peak | FLOP/s vs fused | "
             + " | ".join(memory_columns.values()) + " |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
             + "---:|" * len(memory_columns)]
    for r in rows:
        name = LOOP_TITLES[r["loop"]] + (", data pre-materialised" if r["materialised"] else "")
        head = (f"| {name} | {r['precision']} | {'on' if r['xla'] else 'off'} | {r['replicas']} "
                f"| {r['cycles_per_loop']} ")
        if not _ok(r):
            lines.append(head + f"| failed: {r['error']} |" + " |" * (6 + len(memory_columns)))
            continue
        memory = " | ".join(_number(r[field], ".1f", "n/a") for field in memory_columns)
        lines.append(
            head + f"| {r['images_per_second']:.1f} | {_number(r.get('images_vs_fused'), '.2f')} "
            f"| {_number(cpu_ms_per_image(r), '.3f')} | {r['flops_per_cycle'] / 1e9:.3f} | {r['flops_per_second'] / 1e9:.1f} "
            f"| {r['peak_fraction']:.1%} | {_number(r.get('flops_vs_fused'), '.2f')} "
            f"| {memory} |")
    return lines


def markdown(*, results: list[dict], targets: list[dict], notes: list[str], peaks: dict,
             self_check: dict, settings: dict, specs: dict) -> str:
    """The whole report as markdown."""
    check = ", ".join(f"{loop} {self_check['counted'][loop]:,} (hand {self_check['hand'][loop]:,})"
                      for loop in self_check["counted"])
    lines = [
        "## Gantry throughput report",
        "",
        f"TF {settings['tensorflow']}, Keras {settings['keras']}, {settings['cpu_count']} CPU "
        f"cores, devices {', '.join(settings['devices'])}; {settings['repeats']} timed "
        f"repeats (median); run took {settings['seconds'] / 60:.1f} min; process peak RSS "
        f"{_number(settings['process_peak_rss_mib'], '.0f', 'n/a')} MiB.",
        "",
        f"Matmul peak ({settings['matmul_size']}^2, best of 5 calls in each timing round, "
        "highest round): "
        + ", ".join(f"{p} {v / 1e9:.0f} GFLOP/s" for p, v in peaks.items()) + ".",
        "",
        f"FLOP-count self-check, MLP pair at batch {self_check['batch_size']}: {check}: "
        f"{'OK' if self_check['ok'] else 'MISMATCH'}.",
    ]
    for model in dict.fromkeys(r["model"] for r in results):
        rows = [r for r in results if r["model"] == model]
        spec = specs[model]
        width = f", width {spec.width}" if spec.width else ""
        lines += ["", f"### {model}: {spec.title}, data {rows[0]['data']}, batch "
                      f"{spec.batch_size}{width}, {spec.cycles} timed cycles per repeat", ""]
        lines += _case_table(rows, settings["memory_columns"])
    lines += ["", "### Targets", "", "| target | workload | measured | status |",
              "|---|---|---|---|"]
    lines += [f"| {t['target']} | {t['model']} | {t['measured']} | {t['status']} |"
              for t in targets]
    lines += ["", "### Where the time goes", "",
              "Images/s factors at each workload's reference settings (below 1: slower).", "",
              *time_split(results)]
    lines += ["", "### Slowest path", "", *slowest_paths(results)]
    if notes:
        lines += ["", "### Notes", "", *[f"- {note}" for note in notes]]
    return "\n".join(lines)
