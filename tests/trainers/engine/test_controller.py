"""The outer loop with a stand-in trainer: loop boundaries, actions, checkpoints, NaN handling,
the time budget (--train_time, on a fake clock)."""

import json
import types

import numpy as np
import pytest
import tensorflow as tf

from trainers.engine.controller import Controller, NanPolicy, NonFiniteError, PeriodicAction
from trainers.engine.phases import Phase
from trainers.engine.time_budget import TIME_RECORD_FILE, TimeBudget
from trainers.engine.trainer import LoopOutput


class FakeTrainer:
    """Counts cycles like the real trainer and reports a chosen metric value."""

    def __init__(self, metric=1.0, bad_loops=()):
        self.weight = tf.Variable([1.0, 2.0])
        self.state = types.SimpleNamespace(
            step=tf.Variable(0, dtype=tf.int64),
            learning_rate_scales={"discriminator": tf.Variable(1.0)},
            is_finite=lambda: bool(tf.reduce_all(tf.math.is_finite(self.weight))))
        self.phases = (Phase(name="discriminator", models=("d",), loss=None, repeats=2),)
        self.global_batch_size = 4
        self.metric = metric
        self.bad_loops = set(bad_loops)
        self.calls = []
        self.input_resets = 0

    def train(self, num_cycles, *, record_gradients=False):
        self.calls.append((int(self.state.step.numpy()), num_cycles, record_gradients))
        self.state.step.assign_add(num_cycles)
        skipped = 1.0 if len(self.calls) in self.bad_loops else 0.0
        return LoopOutput(metrics={"discriminator/loss": self.metric,
                                   "discriminator/nonfinite": skipped}, gradients={})

    def reset_input(self):
        self.input_resets += 1


def manager_for(trainer, directory):
    checkpoint = tf.train.Checkpoint(step=trainer.state.step, weight=trainer.weight)
    return tf.train.CheckpointManager(checkpoint, str(directory), max_to_keep=10)


def test_loops_end_on_every_periodic_step(tmp_path):
    trainer = FakeTrainer()
    seen = {"images": [], "histograms": [], "every_loop": []}
    actions = [
        PeriodicAction(name="images", every=4, fn=lambda r: seen["images"].append(r.step)),
        PeriodicAction(name="histograms", every=6, needs_gradients=True,
                       fn=lambda r: seen["histograms"].append(r.step)),
        PeriodicAction(name="every_loop", every=0, fn=lambda r: seen["every_loop"].append(r.step)),
    ]
    manager = manager_for(trainer, tmp_path)
    controller = Controller(trainer=trainer, train_cycles=13, cycles_per_loop=5,
                            checkpoint_manager=manager, checkpoint_every=5, actions=actions)
    assert controller.run() == 13
    stops = [start + n for start, n, _ in trainer.calls]
    assert stops == [4, 5, 6, 8, 10, 12, 13]
    assert seen["images"] == [4, 8, 12]
    assert seen["histograms"] == [6, 12]
    assert seen["every_loop"] == stops
    assert [record for _, _, record in trainer.calls] == [False, False, True, False, False, True, False]
    assert [int(p.rsplit("-", 1)[1]) for p in manager.checkpoints] == [5, 10, 13]


def test_images_per_second_counts_real_batches():
    trainer = FakeTrainer()
    reports = []
    controller = Controller(trainer=trainer, train_cycles=3, cycles_per_loop=3, checkpoint_manager=None,
                            checkpoint_every=0, actions=[PeriodicAction("r", 0, reports.append)])
    controller.run()
    (report,) = reports
    # 3 cycles x 2 discriminator repeats x batch 4 real images
    assert report.images_per_second == pytest.approx(24 / report.seconds)


def test_finished_run_trains_nothing(tmp_path):
    trainer = FakeTrainer()
    trainer.state.step.assign(10)
    controller = Controller(trainer=trainer, train_cycles=10, cycles_per_loop=5,
                            checkpoint_manager=manager_for(trainer, tmp_path), checkpoint_every=5)
    assert controller.run() == 0
    assert trainer.calls == []


def test_nan_metric_stops_before_checkpointing(tmp_path):
    trainer = FakeTrainer(metric=float("nan"))
    manager = manager_for(trainer, tmp_path)
    controller = Controller(trainer=trainer, train_cycles=10, cycles_per_loop=2,
                            checkpoint_manager=manager, checkpoint_every=2)
    with pytest.raises(NonFiniteError, match="step 2"):
        controller.run()
    assert manager.checkpoints == []
    assert tf.train.latest_checkpoint(str(tmp_path)) is None


def test_non_finite_variables_are_never_checkpointed(tmp_path):
    trainer = FakeTrainer()
    manager = manager_for(trainer, tmp_path)
    controller = Controller(trainer=trainer, train_cycles=4, cycles_per_loop=2,
                            checkpoint_manager=manager, checkpoint_every=2)
    controller.run()
    good = manager.latest_checkpoint
    trainer.weight.assign([np.inf, 0.0])
    with pytest.raises(NonFiniteError, match="NaN/Inf"):
        controller.save()
    assert manager.latest_checkpoint == good
    assert tf.train.load_variable(good, "weight/.ATTRIBUTES/VARIABLE_VALUE").tolist() == [1.0, 2.0]


@pytest.mark.parametrize("kwargs, message", [
    (dict(train_cycles=0), "--train_cycles=0"),
    (dict(cycles_per_loop=0), "--cycles_per_loop=0"),
    (dict(train_cycles=None), "needs a time budget"),
])
def test_controller_validates_arguments(kwargs, message):
    arguments = dict(trainer=FakeTrainer(), train_cycles=5, cycles_per_loop=1,
                     checkpoint_manager=None, checkpoint_every=0) | kwargs
    with pytest.raises(ValueError, match=message):
        Controller(**arguments)


def test_rollback_restores_the_last_checkpoint_and_lowers_learning_rates(tmp_path):
    trainer = FakeTrainer(bad_loops={3})
    manager = manager_for(trainer, tmp_path)
    controller = Controller(trainer=trainer, train_cycles=8, cycles_per_loop=2, checkpoint_manager=manager,
                            checkpoint_every=2, nan_policy=NanPolicy(rollback=True, learning_rate_factor=0.5))
    controller.run()
    # loops: 0->2, 2->4, 4->6 (skipped updates: roll back to 4), 4->6, 6->8
    assert [(start, start + n) for start, n, _ in trainer.calls] == [(0, 2), (2, 4), (4, 6), (4, 6), (6, 8)]
    assert controller.rollbacks == [(6, 4)]
    assert trainer.input_resets == 1
    assert float(trainer.state.learning_rate_scales["discriminator"].numpy()) == 0.5
    assert int(trainer.state.step.numpy()) == 8


def test_rollback_gives_up_after_max_rollbacks(tmp_path):
    trainer = FakeTrainer(bad_loops={2, 3, 4})
    controller = Controller(trainer=trainer, train_cycles=8, cycles_per_loop=2,
                            checkpoint_manager=manager_for(trainer, tmp_path), checkpoint_every=2,
                            nan_policy=NanPolicy(rollback=True, max_rollbacks=2))
    with pytest.raises(NonFiniteError, match="already rolled back 2 times"):
        controller.run()


def test_rollback_without_a_checkpoint_stops(tmp_path):
    trainer = FakeTrainer(bad_loops={1})
    controller = Controller(trainer=trainer, train_cycles=8, cycles_per_loop=2,
                            checkpoint_manager=manager_for(trainer, tmp_path), checkpoint_every=4,
                            nan_policy=NanPolicy(rollback=True))
    with pytest.raises(NonFiniteError, match="no checkpoint to roll back to"):
        controller.run()


def test_stop_policy_names_the_step_and_the_option(tmp_path):
    trainer = FakeTrainer(bad_loops={2})
    controller = Controller(trainer=trainer, train_cycles=8, cycles_per_loop=2,
                            checkpoint_manager=manager_for(trainer, tmp_path), checkpoint_every=2)
    with pytest.raises(NonFiniteError, match="step 4.*--nan_policy=rollback"):
        controller.run()
    assert [int(p.rsplit("-", 1)[1]) for p in tf.train.get_checkpoint_state(str(tmp_path)).all_model_checkpoint_paths] == [2]


def test_a_stop_request_saves_at_the_loop_end_and_raises(tmp_path):
    from trainers.engine.preemption import Preempted, SignalPreemption

    trainer = FakeTrainer()
    manager = manager_for(trainer, tmp_path)
    preemption = SignalPreemption(signals=())
    stop_after_first = PeriodicAction("stop", 0, lambda report: preemption.request())
    controller = Controller(trainer=trainer, train_cycles=100, cycles_per_loop=3,
                            checkpoint_manager=manager, checkpoint_every=50,
                            actions=[stop_after_first], preemption=preemption)
    with pytest.raises(Preempted, match="step 3") as stopped:
        controller.run()
    assert stopped.value.step == 3
    assert [int(p.rsplit("-", 1)[1]) for p in manager.checkpoints] == [3]



class TimedTrainer(FakeTrainer):
    """A stand-in trainer whose every compiled loop takes `seconds` on `clock`, noting the
    value of `progress` (a train-time progress variable) each loop starts with."""

    def __init__(self, clock, seconds=10.0, progress=None):
        super().__init__()
        self.clock, self.seconds, self.progress = clock, seconds, progress
        self.progress_seen = []

    def train(self, num_cycles, *, record_gradients=False):
        if self.progress is not None:
            self.progress_seen.append(float(self.progress.numpy()))
        self.clock.now += self.seconds
        return super().train(num_cycles, record_gradients=record_gradients)


class Clock:
    now = 1000.0

    def __call__(self):
        return self.now


def timed_run(logdir, *, seconds, restore=False, action_seconds=0.0, train_cycles=1000,
              progress=None):
    """Trains a `TimedTrainer` in `logdir` (restored from its latest checkpoint) under a budget
    of `seconds`, each loop's actions taking `action_seconds`; returns the controller, its
    manager and the reports of its loops. `train_cycles` None: the budget is the only limit.
    `progress`: the train-time progress variable the controller assigns."""
    clock = Clock()
    trainer = TimedTrainer(clock, progress=progress)
    manager = manager_for(trainer, logdir / "checkpoints")
    if restore:
        manager.checkpoint.restore(manager.latest_checkpoint).assert_existing_objects_matched()
    budget = TimeBudget.resumed(seconds=seconds, logdir=str(logdir), clock=clock,
                                step=int(trainer.state.step.numpy()))
    reports = []

    def act(report):
        reports.append(report)
        clock.now += action_seconds

    controller = Controller(trainer=trainer, train_cycles=train_cycles, cycles_per_loop=5,
                            checkpoint_manager=manager, checkpoint_every=0,
                            actions=[PeriodicAction("r", 0, act)], time_budget=budget,
                            train_time_progress=progress)
    controller.run()
    return controller, manager, reports


def steps_of(manager):
    return [int(path.rsplit("-", 1)[1]) for path in manager.checkpoints]


def test_the_run_ends_after_the_loop_that_uses_the_time_up(tmp_path):
    controller, manager, reports = timed_run(tmp_path, seconds=25)
    assert controller.step == 15  # loops of 10 s: 10, 20, then 30 >= 25
    assert [(r.step, r.final) for r in reports] == [(5, False), (10, False), (15, True)]
    assert steps_of(manager) == [15]  # the final checkpoint, like at --train_cycles
    assert json.loads((tmp_path / TIME_RECORD_FILE).read_text()) == {"15": 30.0}
    assert controller.finished() and controller.run() == 0


def test_without_a_cycle_limit_the_time_alone_ends_the_run(tmp_path):
    controller, manager, reports = timed_run(tmp_path, seconds=95, train_cycles=None)
    assert controller.step == 50  # ten loops of 10 s (5 cycles each): 100 s >= 95
    assert [r.step for r in reports] == list(range(5, 55, 5))
    assert [r.final for r in reports] == [False] * 9 + [True]
    assert steps_of(manager) == [50]
    assert controller.finished() and not controller.steps_done() and controller.run() == 0


def test_with_both_limits_the_cycles_can_end_the_run_first(tmp_path):
    controller, manager, reports = timed_run(tmp_path, seconds=95, train_cycles=12)
    assert [(r.step, r.final) for r in reports] == [(5, False), (10, False), (12, True)]
    assert controller.steps_done() and steps_of(manager) == [12]


def test_time_used_up_by_the_actions_still_ends_with_a_final_loop_and_checkpoint(tmp_path):
    # 10 s after the first loop, 16 s after its actions: the second loop is the final one.
    controller, manager, reports = timed_run(tmp_path, seconds=14, action_seconds=6)
    assert [(r.step, r.final) for r in reports] == [(5, False), (10, True)]
    assert steps_of(manager) == [10]


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


def test_each_loop_starts_with_the_share_of_the_time_used_also_after_a_resume(tmp_path):
    progress = tf.Variable(0.5)  # overwritten before the first loop
    controller, _, _ = timed_run(tmp_path, seconds=40, progress=progress)
    np.testing.assert_allclose(controller.trainer.progress_seen, [0.0, 0.25, 0.5, 0.75])
    # 40 s used at step 20; a budget of 80 s: the resumed loops start at 40, 50, 60 and 70 s.
    resumed, _, _ = timed_run(tmp_path, seconds=80, restore=True, progress=progress)
    np.testing.assert_allclose(resumed.trainer.progress_seen, [0.5, 0.625, 0.75, 0.875])


def test_a_progress_variable_without_a_time_budget_is_refused():
    with pytest.raises(ValueError, match="train_time_progress follows a time budget"):
        Controller(trainer=FakeTrainer(), train_cycles=4, cycles_per_loop=2, checkpoint_manager=None,
                   checkpoint_every=0, train_time_progress=tf.Variable(0.0))


def test_a_run_without_a_record_starts_with_nothing_used(tmp_path):
    budget = TimeBudget.resumed(seconds=60, logdir=str(tmp_path), step=40)
    assert budget.elapsed() == 0.0 and not budget.spent()
