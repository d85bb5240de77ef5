"""Marker lines written from inside a training process, so that a kill's moment is known exactly.

Every run.py process of the soak is started as `python benchmarks/chaos_observer.py MARKERS
FLAGS...`, which runs run.py unchanged in the same process after wrapping four Gantry functions
so that each appends a line `<monotonic time> <event> <step>` to the file MARKERS: `run`
(Controller.run entered, at the restored step), `train`/`trained` (a compiled loop of
Trainer.train), `save`/`saved` (Controller.save) and `eval`/`evaluated` (the `--eval_every` job,
whose best checkpoint save is inside it). The lines are written before and after each event, so
the last line a killed process wrote says where it died.

Wrapping functions instead of watching output is what makes moments exact: run.py logs nothing
per loop, and its event files are flushed in batches.
"""

from __future__ import annotations

import dataclasses
import os
import runpy
import sys
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclasses.dataclass(frozen=True)
class Event:
    """One markers line: `name` happened at `time` (time.monotonic, shared by all processes)."""

    time: float
    name: str
    step: int


def read_events(markers: str) -> list[Event]:
    """The complete lines of the file `markers` (a killed process may have cut its last one)."""
    if not os.path.exists(markers):
        return []
    with open(markers) as file:
        fields = [line.split() for line in file if line.endswith("\n")]
    return [Event(float(time_), name, int(step)) for time_, name, step in fields]


def run_observed(markers: str, flags: list[str]) -> None:
    """Runs `run.py FLAGS` in this process, its events appended to the file `markers`."""
    sys.path.insert(0, REPO_ROOT)
    descriptor = os.open(markers, os.O_WRONLY | os.O_CREAT | os.O_APPEND)

    def mark(event: str, step: int) -> None:
        os.write(descriptor, f"{time.monotonic():.4f} {event} {step}\n".encode())

    install_markers(mark)
    sys.argv = [os.path.join(REPO_ROOT, "run.py"), *flags]
    runpy.run_path(sys.argv[0], run_name="__main__")


def install_markers(mark) -> None:
    """Wraps Controller.run, Trainer.train, Controller.save and the evaluation job so each calls
    `mark(event, step)`; behaviour is otherwise unchanged. Run before run.py imports the train
    mode, which binds `best_checkpoint_job` by name."""
    from trainers.engine.controller import Controller
    from trainers.engine.trainer import Trainer
    from trainers.evaluation import best
    run, train, save, job = Controller.run, Trainer.train, Controller.save, best.best_checkpoint_job

    def observed_run(self):
        mark("run", self.step)
        return run(self)

    def observed_train(self, num_cycles, **options):
        step = int(self.state.step.numpy())
        mark("train", step)
        output = train(self, num_cycles, **options)
        mark("trained", step + num_cycles)
        return output

    def observed_save(self):
        mark("save", self.step)
        path = save(self)
        mark("saved", self.step)
        return path

    def observed_job(**options):
        action = job(**options)

        def evaluate(report):
            mark("eval", report.step)
            action.fn(report)
            mark("evaluated", report.step)

        return dataclasses.replace(action, fn=evaluate)

    Controller.run, Trainer.train, Controller.save = observed_run, observed_train, observed_save
    best.best_checkpoint_job = observed_job


if __name__ == "__main__":
    run_observed(sys.argv[1], sys.argv[2:])
