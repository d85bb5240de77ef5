"""The single-process soak: where to aim the kills, when each lands, and what each cost.

Kill moments are drawn from the reference run's timing (`plan_kills`); the chaos run is
started, killed at each target, restarted with the same command, and finally let run to its
end (`soak`); the markers of the processes that followed a kill say what it cost
(`account_losses`).
"""

from __future__ import annotations

import dataclasses
import os
import random
import statistics
import time

from benchmarks.chaos_logdir import EndState, end_state, latest_checkpoint_step, read_best_record
from benchmarks.chaos_moments import moment
from benchmarks.chaos_processes import Process, kill, launch, wait

TARGETS = ("random", "checkpoint", "checkpoint-temp", "evaluation")
POLL_SECONDS = 0.002


@dataclasses.dataclass(frozen=True)
class Timing:
    """From the reference run: where the kill moments are drawn."""

    startup: float
    random_window: float
    save: float
    evaluation: float
    wall: float


def reference_timing(process: Process) -> Timing:
    events = process.events()

    def durations(start: str, end: str) -> list[float]:
        starts = [e.time for e in events if e.name == start]
        ends = [e.time for e in events if e.name == end]
        return [finished - began for began, finished in zip(starts, ends)]

    saved = [e.time for e in events if e.name == "saved"]
    first_loop = next(e.time for e in events if e.name == "trained")
    return Timing(startup=first_loop - process.launched,
                  random_window=saved[min(1, len(saved) - 1)] - process.launched,
                  save=statistics.mean(durations("save", "saved")),
                  evaluation=statistics.mean(durations("eval", "evaluated") or [0.0]),
                  wall=process.ended - process.launched)


@dataclasses.dataclass(frozen=True)
class Target:
    """Where to kill a process: `kind` (TARGETS), the `ordinal`-th save or evaluation of the
    process, `delay` seconds after it began (after the launch for `random`)."""

    kind: str
    ordinal: int
    delay: float

    def label(self) -> str:
        if self.kind == "random":
            return f"random, {self.delay:.1f} s after launch"
        if self.kind == "checkpoint-temp":
            return f"save #{self.ordinal}, at ckpt-N_temp/"
        what = "save" if self.kind == "checkpoint" else "eval"
        return f"{what} #{self.ordinal} +{self.delay * 1000:.0f} ms"


def plan_kills(count: int, rng: random.Random, timing: Timing) -> list[Target]:
    """`count` targets, the kinds in equal shares, shuffled; ordinals 1 or 2 so that a restart
    often makes progress (killing the first save after a resume redoes everything)."""
    kinds = [TARGETS[i % len(TARGETS)] for i in range(count)]
    rng.shuffle(kinds)
    windows = {"random": timing.random_window, "checkpoint": 0.8 * timing.save,
               "checkpoint-temp": 0.0, "evaluation": 0.8 * timing.evaluation}
    return [Target(kind, ordinal=rng.randint(1, 2), delay=rng.uniform(0, windows[kind]))
            for kind in kinds]


def trigger_time(process: Process, target: Target, logdir: str, every: dict[str, int],
                 train_cycles: int) -> float | None:
    """When the target's moment began in `process` (its delay counts from then), or None while
    it has not. The ordinal is capped at the saves or evaluations left before the end, so a
    kill never waits for one that will not come."""
    if target.kind == "random":
        return process.launched
    events = process.events()
    resumed = next((e.step for e in events if e.name == "run"), None)
    if resumed is None:
        return None
    marker = "eval" if target.kind == "evaluation" else "save"
    left = train_cycles // every[marker] - resumed // every[marker]
    begun = [e for e in events if e.name == marker]
    ordinal = max(1, min(target.ordinal, left))
    if len(begun) < ordinal:
        return None
    if target.kind == "checkpoint-temp":
        # The latest save, not the ordinal-th: a temp folder missed between polls moves the
        # kill to the next save instead of letting the process finish.
        temp = os.path.join(logdir, "checkpoints", f"ckpt-{begun[-1].step}_temp")
        return time.monotonic() if os.path.exists(temp) else None
    return begun[ordinal - 1].time


def wait_for_target(process: Process, target: Target, logdir: str, every: dict[str, int],
                    train_cycles: int) -> bool:
    """Blocks until the target's moment; False when the process exits before it."""
    began = None
    while process.popen.poll() is None:
        if began is None:
            began = trigger_time(process, target, logdir, every, train_cycles)
        if began is not None and time.monotonic() >= began + target.delay:
            return True
        time.sleep(POLL_SECONDS)
    return False


@dataclasses.dataclass
class Kill:
    target: Target
    moment: str
    at: float
    reached: int
    resumed: int | None = None
    seconds_lost: float | None = None
    cut_by_next_kill: bool = False


@dataclasses.dataclass
class Soak:
    """The outcome: `processes[i + 1]` was started after `kills[i]`; `refused` counts the
    restarts the run lock turned away."""

    kills: list[Kill]
    processes: list[Process]
    failure: str | None
    fingerprint: tuple[int, str] | None
    best_record: dict | None
    wall: float
    end: EndState
    refused: int


def soak(flags: list[str], logdir: str, reference: str, directory: str, plan: list[Target],
         every: dict[str, int], train_cycles: int) -> Soak:
    """Starts, kills and restarts the chaos run along `plan`, then lets it finish."""
    kills, processes, failure = [], [], None
    for index, target in enumerate([*plan, None]):
        started_from = latest_checkpoint_step(logdir)
        process = launch(flags, directory, f"chaos-{index:02d}")
        process.started_from = started_from
        processes.append(process)
        if target is not None and wait_for_target(process, target, logdir, every, train_cycles):
            kill(process)
            kills.append(Kill(target=target, moment=moment(process, logdir), at=process.killed_at,
                              reached=process.reached_step()))
        else:
            wait(process)
        failure = process.failure()
        if failure or target is None or process.killed_at is None:
            break
    account_losses(kills, processes[1:])
    last = processes[-1]
    return Soak(kills=kills, processes=processes, failure=failure, fingerprint=last.fingerprint(),
                best_record=read_best_record(logdir), wall=last.ended - processes[0].launched,
                end=end_state(logdir, reference),
                refused=sum(process.refused_by_lock() for process in processes[1:]))


def account_losses(kills: list[Kill], restarts: list[Process]) -> None:
    """Fills `resumed` and `seconds_lost` of each kill from the markers of the processes that
    followed it (`restarts[i]` is the process started after kill i)."""
    for index, kill_ in enumerate(kills):
        if index >= len(restarts):
            break
        later = [e for process in restarts[index:] for e in process.events()]
        kill_.resumed = restarts[index].resumed_step()
        back = next((e.time for e in later if e.name == "trained" and e.step >= kill_.reached), None)
        next_kill = kills[index + 1].at if index + 1 < len(kills) else None
        if next_kill is not None and (back is None or next_kill < back):
            kill_.seconds_lost, kill_.cut_by_next_kill = next_kill - kill_.at, True
        elif back is not None:
            kill_.seconds_lost = back - kill_.at
