"""The soak's report: the kill table, the verdict lines of each case, and
benchmarks/results/chaos.md."""

from __future__ import annotations

import datetime
import os
import re
import statistics
import subprocess

from benchmarks.chaos_logdir import EndState
from benchmarks.chaos_moments import MOMENTS
from benchmarks.chaos_processes import REFUSED_BY_LOCK
from benchmarks.chaos_soak import Kill, Soak
from benchmarks.chaos_workers import WorkerCase


def kill_table(kills: list[Kill]) -> list[str]:
    lines = ["| # | target | moment | reached | resumed | cycles lost | s lost |",
             "| ---: | --- | --- | ---: | ---: | ---: | ---: |"]
    for number, k in enumerate(kills, 1):
        lost = "?" if k.resumed is None else str(k.reached - k.resumed)
        seconds = "?" if k.seconds_lost is None else (
            f"{'>=' if k.cut_by_next_kill else ''}{k.seconds_lost:.1f}")
        lines.append(f"| {number} | {k.target.label()} | {k.moment} | {k.reached} | "
                     f"{'?' if k.resumed is None else k.resumed} | {lost} | {seconds} |")
    return lines


def soak_verdict(result: Soak, reference: tuple[int, str], reference_best: dict | None,
                 reference_wall: float, planned: int) -> tuple[list[str], bool]:
    """The verdict lines of the single-process soak and whether it passed."""
    resumed = len(result.kills) - (1 if result.failure and result.kills else 0)
    identical = result.fingerprint == reference
    same_best = result.best_record == reference_best
    counts = {name: sum(1 for k in result.kills if k.moment.startswith(name)) for name in MOMENTS}
    losses = [k.seconds_lost for k in result.kills if k.seconds_lost is not None]
    mean_lost = statistics.mean(losses) if losses else float("nan")
    overhead = result.wall - reference_wall
    lines = [
        f"{resumed}/{len(result.kills)} resumed, bit-identical: {'yes' if identical else 'no'}"
        + ("" if len(result.kills) == planned else f" (only {len(result.kills)} of {planned} "
           "planned kills happened)"),
        f"fingerprint: chaos {describe(result.fingerprint)}, reference {describe(reference)}",
        f"best checkpoint record (best.json) equal to the reference's: "
        f"{'yes' if same_best else 'no'}",
        f"run lock: restarts after a SIGKILL refused (exit 2, \"{REFUSED_BY_LOCK}\"): "
        f"{result.refused} of {len(result.processes) - 1}",
        *end_state_lines(result.end),
        "kills by moment: " + ", ".join(f"{name} {count}" for name, count in counts.items()),
        f"mean time lost per kill: {mean_lost:.1f} s (kill -> back at the step reached); chaos "
        f"run {result.wall:.0f} s vs reference {reference_wall:.0f} s: "
        f"{overhead / max(len(result.kills), 1):.1f} s per kill",
    ]
    if result.failure:
        lines.append(f"RESTART FAILED ({result.processes[-1].stderr}): {result.failure}")
    passed = (identical and same_best and not result.failure and resumed == len(result.kills)
              and not result.refused and result.end.clean())
    return lines, passed


def end_state_lines(end: EndState, prefix: str = "") -> list[str]:
    """What the run directory holds at the end beyond the reference's (see EndState)."""
    def listed(paths: list[str], meaning: str) -> str:
        return f"{', '.join(paths)} ({meaning})" if paths else "none"

    return [
        f"{prefix}unfinished saves (*_temp) left at the end: "
        + listed(end.unfinished, "saves cut short that no restart removed"),
        f"{prefix}checkpoints moved to corrupt/: "
        + listed(end.corrupt, "a listed checkpoint was found unreadable on restore"),
        f"{prefix}other entries the reference's LOGDIR lacks (event files aside; .gantry-lock is "
        "in both): " + listed(end.other, "reported, not failed"),
    ]


def worker_verdict(case: WorkerCase) -> list[str]:
    return [
        f"two workers: killed worker {case.killed_worker} (SIGKILL) at step {case.reached} "
        f"(moment: {case.moment}); worker {1 - case.killed_worker} {case.survivor}",
        f"two workers: resumed from {case.resumed_from}, cycles lost "
        f"{case.reached - case.resumed_from} (<= --checkpoint_every={case.checkpoint_every}: "
        f"{'yes' if case.within_budget() else 'no'})",
        f"two workers: fingerprints {', '.join(describe(f) for f in case.resumed)}; reference "
        f"{', '.join(describe(f) for f in case.reference)}; bit-identical: "
        f"{'yes' if case.identical() else 'no'}",
        *end_state_lines(case.end, prefix="two workers: "),
        *case.failures,
    ]


def describe(fingerprint: tuple[int, str] | None) -> str:
    return "none" if fingerprint is None else f"{fingerprint[1]} (step {fingerprint[0]})"


def git(path: str, *arguments: str) -> str:
    """The output of a read-only git command in the repository holding `path`."""
    return subprocess.run(["git", *arguments], cwd=os.path.dirname(path), capture_output=True,
                          text=True).stdout.strip()


def cpu_flags() -> str:
    with open("/proc/cpuinfo") as file:
        return " ".join(sorted(set(re.findall(r"\b(avx512_bf16|avx2)\b", file.read())))) or "none"


def write_results(path: str, command: str, body: list[str]) -> None:
    """Writes the results file `path` (in the repository, whose commit it names: the soak ran
    against the working tree)."""
    commit = git(path, "rev-parse", "--short", "HEAD")
    if git(path, "--no-optional-locks", "status", "--porcelain"):
        commit += " with uncommitted changes"
    header = [
        "# Kill -9 soak (`benchmarks/chaos.py`)", "",
        "How the kills are placed, how their moments are known and what the columns mean: the "
        "docstring of `benchmarks/chaos.py`.", "",
        f"Date: {datetime.date.today().isoformat()}; commit {commit}; CPU flags: {cpu_flags()} "
        f"({os.cpu_count()} cores, no GPU).", "",
        "```sh", command, "```", ""]
    with open(path, "w") as file:
        file.write("\n".join(header + body) + "\n")
