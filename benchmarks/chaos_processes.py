"""The run.py processes of the kill -9 soak: started through the observer, SIGKILLed or waited
for, and read back (markers, fingerprint, failure, refusal by the run lock)."""

from __future__ import annotations

import dataclasses
import os
import re
import signal
import subprocess
import sys
import time

from benchmarks import chaos_observer
from benchmarks.chaos_observer import REPO_ROOT, Event

ENVIRONMENT = {**os.environ, "GANTRY_OFFLINE": "1", "TF_CPP_MIN_LOG_LEVEL": "2"}
FINISHED = re.compile(r"Finished at step (\d+); weights fingerprint (\w+)")
# What run.py prints when another process holds LOGDIR/.gantry-lock (trainers/engine/run_lock.py).
REFUSED_BY_LOCK = "is being trained by"
PROCESS_TIMEOUT = 1200.0


def read_text(path: str) -> str:
    with open(path, errors="replace") as file:
        return file.read()


@dataclasses.dataclass
class Process:
    """One observed run.py process; its output and markers are files in the work directory.
    `started_from` is the step the `checkpoint` state file named when it was launched."""

    popen: subprocess.Popen
    launched: float
    markers: str
    stdout: str
    stderr: str
    started_from: int = 0
    killed_at: float | None = None
    ended: float | None = None
    timed_out: bool = False

    def events(self) -> list[Event]:
        return chaos_observer.read_events(self.markers)

    def fingerprint(self) -> tuple[int, str] | None:
        found = FINISHED.search(read_text(self.stdout))
        return (int(found.group(1)), found.group(2)) if found else None

    def failure(self) -> str | None:
        """Why this process counts as failed (None: it did not): a non-zero exit it was not
        killed into, or a traceback, with the tail of its stderr."""
        code = self.popen.poll()
        stderr = read_text(self.stderr)
        if self.timed_out:
            return f"still running after {PROCESS_TIMEOUT:.0f} s, SIGKILLed:\n{stderr[-3000:]}"
        if self.killed_at is None and code not in (None, 0):
            return f"exit code {code}:\n{stderr[-3000:]}"
        if "Traceback (most recent call last)" in stderr:
            return f"traceback (exit code {code}):\n{stderr[-3000:]}"
        return None

    def refused_by_lock(self) -> bool:
        """Whether run.py refused to train because another process held the run's lock. The
        kernel releases an flock when its holder dies, even by SIGKILL, so a restart after a
        kill must never be refused."""
        return self.popen.poll() == 2 and REFUSED_BY_LOCK in read_text(self.stderr)

    def resumed_step(self) -> int:
        """The step the process restored (its `run` line); before that line, the step the
        `checkpoint` state file named at its launch, which is what it was restoring."""
        return next((e.step for e in self.events() if e.name == "run"), self.started_from)

    def reached_step(self) -> int:
        """The last step the process finished (the step it resumed from when it finished none)."""
        return max([self.resumed_step(), *(e.step for e in self.events() if e.name == "trained")])


def launch(flags: list[str], directory: str, name: str, environment: dict | None = None) -> Process:
    """Starts `run.py FLAGS` through the observer, from the repository root."""
    paths = {suffix: os.path.join(directory, f"{name}.{suffix}") for suffix in ("markers", "out", "err")}
    with open(paths["out"], "w") as stdout, open(paths["err"], "w") as stderr:
        popen = subprocess.Popen(
            [sys.executable, os.path.abspath(chaos_observer.__file__), paths["markers"], *flags],
            cwd=REPO_ROOT, env=environment or ENVIRONMENT, stdout=stdout, stderr=stderr)
    return Process(popen=popen, launched=time.monotonic(), markers=paths["markers"],
                   stdout=paths["out"], stderr=paths["err"])


def kill(process: Process) -> None:
    """SIGKILL, and wait until the process is gone so its markers are final."""
    process.killed_at = time.monotonic()
    process.popen.send_signal(signal.SIGKILL)
    process.popen.wait()
    process.ended = time.monotonic()


def wait(process: Process) -> None:
    """Waits for the process to exit; one that runs PROCESS_TIMEOUT seconds hangs: SIGKILLed."""
    try:
        process.popen.wait(timeout=PROCESS_TIMEOUT)
        process.ended = time.monotonic()
    except subprocess.TimeoutExpired:
        process.timed_out = True
        kill(process)


def run_to_end(flags: list[str], directory: str, name: str) -> Process:
    """An undisturbed process; exits the benchmark when it fails (nothing to compare then)."""
    process = launch(flags, directory, name)
    wait(process)
    if process.failure():
        sys.exit(f"{name} failed: {process.failure()}")
    return process
