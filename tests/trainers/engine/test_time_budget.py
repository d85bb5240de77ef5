"""`--train_time` in the controller, with a fake clock that each compiled loop advances."""

import json

from tests.trainers.engine.test_controller import FakeTrainer, manager_for
from trainers.engine.controller import Controller, PeriodicAction
from trainers.engine.time_budget import TIME_RECORD_FILE, TimeBudget


class TimedTrainer(FakeTrainer):
    """A stand-in trainer whose every compiled loop takes `seconds` on `clock`."""

    def __init__(self, clock, seconds=10.0):
        super().__init__()
        self.clock, self.seconds = clock, seconds

    def train(self, num_cycles, *, record_gradients=False):
        self.clock.now += self.seconds
        return super().train(num_cycles, record_gradients=record_gradients)


class Clock:
    now = 1000.0

    def __call__(self):
        return self.now


def timed_run(logdir, *, seconds, restore=False):
    """Trains a `TimedTrainer` in `logdir` (restored from its latest checkpoint) under a budget
    of `seconds`; returns the controller, its manager and the reports of its loops."""
    clock = Clock()
    trainer = TimedTrainer(clock)
    manager = manager_for(trainer, logdir / "checkpoints")
    if restore:
        manager.checkpoint.restore(manager.latest_checkpoint).assert_existing_objects_matched()
    budget = TimeBudget.resumed(seconds=seconds, logdir=str(logdir), clock=clock,
                                step=int(trainer.state.step.numpy()))
    reports = []
    controller = Controller(trainer=trainer, train_steps=1000, steps_per_loop=5,
                            checkpoint_manager=manager, checkpoint_every=0,
                            actions=[PeriodicAction("r", 0, reports.append)], time_budget=budget)
    controller.run()
    return controller, manager, reports


def steps_of(manager):
    return [int(path.rsplit("-", 1)[1]) for path in manager.checkpoints]


def test_the_run_ends_after_the_loop_that_uses_the_time_up(tmp_path):
    controller, manager, reports = timed_run(tmp_path, seconds=25)
    assert controller.step == 15  # loops of 10 s: 10, 20, then 30 >= 25
    assert [(r.step, r.final) for r in reports] == [(5, False), (10, False), (15, True)]
    assert steps_of(manager) == [15]  # the final checkpoint, like at --train_steps
    assert json.loads((tmp_path / TIME_RECORD_FILE).read_text()) == {"15": 30.0}
    assert controller.finished() and controller.run() == 0


def test_a_resume_trains_only_the_time_left(tmp_path):
    timed_run(tmp_path, seconds=25)
    # A save that crashed after recording its time: the entry of a step with no checkpoint.
    record = tmp_path / TIME_RECORD_FILE
    record.write_text(json.dumps({**json.loads(record.read_text()), "20": 99.0}))
    controller, manager, reports = timed_run(tmp_path, seconds=45, restore=True)
    # 30 s used at step 15, 15 s left: loops end at 40 s and 50 s.
    assert [(r.step, r.final) for r in reports] == [(20, False), (25, True)]
    assert steps_of(manager) == [15, 25]
    assert json.loads(record.read_text())["25"] == 50.0


def test_a_run_without_a_record_starts_with_nothing_used(tmp_path):
    budget = TimeBudget.resumed(seconds=60, logdir=str(tmp_path), step=40)
    assert budget.elapsed() == 0.0 and not budget.spent()
