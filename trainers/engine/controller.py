"""The outer loop: when to train, write summaries, run actions and save checkpoints.

The controller is the only thing that counts steps between jobs. It asks the trainer for
compiled loops that end exactly on the steps where a periodic job is due (see
`intervals.next_stop`), then runs the jobs that fire there. A job is a `PeriodicAction`: a
small callable and its period, separating *when* from *what*.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Callable, Sequence

import tensorflow as tf
from absl import logging

from trainers.engine import intervals
from trainers.engine import phases as phases_lib
from trainers.engine.time_budget import TimeBudget
from trainers.engine.trainer import LoopOutput, Trainer


@dataclasses.dataclass(frozen=True)
class LoopReport:
    """What actions see after a compiled loop; `final` marks the run's last one (at
    --train_cycles, or when --train_time is used up). `logged` gathers the scalars the loop's
    actions write to the summaries, by tag, as they run (`actions.log_scalars`), for the
    actions after them (the history and callbacks of `api.train`)."""

    step: int
    output: LoopOutput
    images_per_second: float
    seconds: float
    final: bool = False
    logged: dict[str, float] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class PeriodicAction:
    """``fn(report)`` run when the step is a multiple of `every` (0: after every loop).

    `needs_gradients` asks the trainer to keep the last gradients of that loop.
    """

    name: str
    every: int
    fn: Callable[[LoopReport], None]
    needs_gradients: bool = False

    def due(self, step: int) -> bool:
        return self.every == 0 or intervals.fires(step, self.every)


class NonFiniteError(FloatingPointError):
    """Training produced NaN or Inf; nothing was checkpointed from that state."""


@dataclasses.dataclass(frozen=True)
class NanPolicy:
    """What to do when a loop reports a NaN/Inf loss or gradient (`--nan_policy`).

    The update step already skipped every non-finite update, so the variables are clean; the
    policy decides whether to stop (the default, naming the step) or to roll back to the last
    checkpoint, multiply every learning rate by `learning_rate_factor`, and go on, at most
    `max_rollbacks` times.
    """

    rollback: bool = False
    learning_rate_factor: float = 1.0
    max_rollbacks: int = 3


class Controller:
    """Drives a `Trainer` to `train_cycles` cycles, or until its time budget is used up.

    Args:
      trainer: the inner loop.
      train_cycles: total cycles; a restored run continues from its step. None: no cycle limit
        (then `time_budget` is required: it alone ends the run).
      cycles_per_loop: most cycles per compiled call.
      checkpoint_manager: saves every `checkpoint_every` cycles and at the end (None: never).
      actions: periodic jobs (summaries, image grids, progress).
      nan_policy: what a NaN/Inf loss or gradient does.
      preemption: ``check(step, save)`` called at every loop end; raises
        `preemption.Preempted` after saving when the job was asked to stop.
      time_budget: ends the run, like reaching `train_cycles`, after the loop that uses it up
        (None: no time limit); every checkpoint records the time used.
      train_time_progress: the variable decaying rate schedules read the share of the time
        budget from (`building.train_time_progress`); assigned before every loop, so a loop
        trains at the rate of the time used when it began.
      stop_requested: asked after each loop's actions (None: never); True ends the run there,
        checkpointed, as reaching `train_cycles` does (a Keras callback's `stop_training`).
    """

    def __init__(
        self,
        *,
        trainer: Trainer,
        train_cycles: int | None,
        cycles_per_loop: int,
        checkpoint_manager: tf.train.CheckpointManager | None,
        checkpoint_every: int,
        actions: Sequence[PeriodicAction] = (),
        nan_policy: NanPolicy = NanPolicy(),
        preemption=None,
        time_budget: TimeBudget | None = None,
        train_time_progress: tf.Variable | None = None,
        stop_requested: Callable[[], bool] | None = None,
    ):
        if train_cycles is not None and train_cycles < 1:
            raise ValueError(f"--train_cycles={train_cycles} must be >= 1.")
        if train_cycles is None and time_budget is None:
            raise ValueError("a run without --train_cycles needs a time budget (--train_time) "
                             "to end it.")
        if cycles_per_loop < 1:
            raise ValueError(f"--cycles_per_loop={cycles_per_loop} must be >= 1.")
        if train_time_progress is not None and time_budget is None:
            raise ValueError("train_time_progress follows a time budget; none was given.")
        self.trainer = trainer
        self.train_cycles = train_cycles
        self.cycles_per_loop = cycles_per_loop
        self.checkpoint_manager = checkpoint_manager
        self.checkpoint_every = checkpoint_every
        self.actions = tuple(actions)
        self.nan_policy = nan_policy
        self.preemption = preemption
        self.time_budget = time_budget
        self.train_time_progress = train_time_progress
        self.stop_requested = stop_requested
        self.rollbacks: list[tuple[int, int]] = []

    @property
    def step(self) -> int:
        return int(self.trainer.state.step.numpy())

    def run(self) -> int:
        """Trains to `train_cycles` or until the time budget is used up; returns the number of
        cycles run by this call."""
        start = self.step
        if self.finished():
            logging.info("Training already finished at step %d (%s): nothing to do.", start,
                         f"--train_cycles={self.train_cycles}" if self.steps_done()
                         else "time budget used up")
            return 0
        if self.time_budget is not None:
            self.time_budget.start()
        periods = [self.checkpoint_every] + [a.every for a in self.actions]
        final = False  # decided once per loop, so the loop that ends the run is checkpointed
        while not final:
            step = self.step
            stop = intervals.next_stop(step, total=self.train_cycles,
                                       cycles_per_loop=self.cycles_per_loop, intervals=periods)
            record = any(a.needs_gradients and a.due(stop) for a in self.actions)
            if self.train_time_progress is not None:
                self.train_time_progress.assign(self.time_budget.share_used())
            began = time.perf_counter()
            output = self.trainer.train(stop - step, record_gradients=record)
            seconds = time.perf_counter() - began
            problems = self._nonfinite(output)
            if problems:
                self._recover(problems, stop)
                continue
            images = (phases_lib.batches_after(self.trainer.phases, stop)
                      - phases_lib.batches_after(self.trainer.phases, step))
            final = self.finished()
            report = LoopReport(
                step=stop, output=output, seconds=seconds, final=final,
                images_per_second=images * self.trainer.global_batch_size / max(seconds, 1e-9))
            for action in self.actions:
                if action.due(stop):
                    action.fn(report)
            final = final or (self.stop_requested is not None and self.stop_requested())
            if final or intervals.fires(stop, self.checkpoint_every):
                self.save()
            if self.preemption is not None:
                self.preemption.check(stop, self.save)
        return self.step - start

    def finished(self) -> bool:
        """Whether `train_cycles` cycles are done or the time budget is used up."""
        return self.steps_done() or (self.time_budget is not None and self.time_budget.spent())

    def steps_done(self) -> bool:
        """Whether `train_cycles` cycles are done (never without a cycle limit)."""
        return self.train_cycles is not None and self.step >= self.train_cycles

    def save(self) -> str | None:
        """Checkpoints the state unless it holds NaN/Inf (then raises, writing nothing)."""
        if self.checkpoint_manager is None:
            return None
        if not self.trainer.state.is_finite():
            raise NonFiniteError(
                f"Step {self.step}: a model or optimizer variable is NaN/Inf; not checkpointing. "
                "The last good checkpoint is kept.")
        if self.time_budget is not None:
            self.time_budget.record(self.step)
        path = self.checkpoint_manager.save(checkpoint_number=self.step)
        logging.info("Saved checkpoint %s", path)
        return path

    @staticmethod
    def _nonfinite(output: LoopOutput) -> list[str]:
        """Metrics that are NaN/Inf, and phases that skipped non-finite updates."""
        return sorted(name for name, value in output.metrics.items()
                      if not math.isfinite(value) or (name.endswith("/nonfinite") and value > 0))

    def _recover(self, problems: list[str], step: int) -> None:
        """Applies the NaN policy after the loop ending at `step` reported `problems`."""
        message = (f"Non-finite values {problems} in the loop ending at step {step}; those updates "
                   "were skipped and nothing was checkpointed.")
        latest = self.checkpoint_manager.latest_checkpoint if self.checkpoint_manager else None
        if not self.nan_policy.rollback:
            raise NonFiniteError(f"{message} Lower the learning rates, check the data, or use "
                                 "--nan_policy=rollback.")
        if latest is None or len(self.rollbacks) >= self.nan_policy.max_rollbacks:
            reason = "no checkpoint to roll back to" if latest is None else (
                f"already rolled back {len(self.rollbacks)} times (--max_rollbacks)")
            raise NonFiniteError(f"{message} Stopping: {reason}.")
        self.checkpoint_manager.checkpoint.restore(latest).assert_existing_objects_matched()
        self.trainer.reset_input()
        for scale in self.trainer.state.learning_rate_scales.values():
            scale.assign(scale * self.nan_policy.learning_rate_factor)
        self.rollbacks.append((step, self.step))
        note = (f"{message} Rolled back to step {self.step} ({latest}); learning rates x"
                f"{self.nan_policy.learning_rate_factor:g}.")
        logging.warning(note)
        tf.summary.text("nan_guard", note, step=step)
