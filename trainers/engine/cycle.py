"""One cycle of the phase schedule, run by both the Trainer and the Keras fit step.

The schedule itself is pure (`phases.runs_in_cycle`, `phases.update_seed`); `run_cycle` is the
one place that turns it into updates, so the compiled loop and `AdversarialModel.train_step`
cannot drift apart in order, laziness or noise keys. What differs between the two callers is
passed in: how one update draws its batch, runs and reports (the Trainer calls `strategy.run`
in cross-replica context on `next(iterator)`; the fit step is already in replica context and
reads a slot of its element), and how a lazy phase is made conditional on a tensor cycle
(`cross_replica_cond` in the Trainer, `steps.replica_cond` in the fit step).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import tensorflow as tf

from trainers.engine.phases import Phase, runs_in_cycle, update_seed

# ``update(phase, repeat, cycle, seed, *args)``: one parameter update of `phase`.
Update = Callable[..., None]
# ``run_if(condition, fn, *args)``: calls ``fn(*args)`` exactly when the tensor `condition` holds.
RunIf = Callable[..., None]


def cross_replica_cond(condition: tf.Tensor, fn: Callable[..., Any], *args: Any) -> None:
    """``fn(*args)`` when `condition`, as one `tf.cond` (cross-replica context, or no strategy).

    Only `fn`'s effects count: what it returns is dropped, so the two branches always match.
    """
    def run():
        fn(*args)

    tf.cond(condition, run, lambda: None)


def run_cycle(phases: Sequence[Phase], cycle: int | tf.Tensor, seed: int, update: Update, *,
              run_if: RunIf, args: tuple = ()) -> None:
    """Makes the updates of the cycle with 0-based index `cycle`, in schedule order.

    For each phase, in list order, that runs in `cycle`, calls
    ``update(phase, repeat, cycle, update_seed(seed, cycle, phase_index, repeat), *args)`` for
    repeat = 0..repeats-1. A phase that runs every cycle is called directly; whether a lazy one
    runs is a tensor when `cycle` is, and its updates then go through ``run_if(runs, fn,
    *args)``. `args` travel through `run_if` rather than in a closure because a `run_if` that
    re-enters replica context must hand each replica its own values (the fit step's element).
    With a Python int `cycle` everything runs in Python: the plan of that cycle.
    """
    for index, phase in enumerate(phases):
        def run_phase(*args, index=index, phase=phase):
            for repeat in range(phase.repeats):
                update(phase, repeat, cycle, update_seed(seed, cycle, index, repeat), *args)

        runs = runs_in_cycle(phase, cycle)
        if tf.is_tensor(runs):
            run_if(runs, run_phase, *args)
        elif runs:
            run_phase(*args)
