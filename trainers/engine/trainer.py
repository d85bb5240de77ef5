"""The inner loop: several cycles of phase updates inside one compiled call.

`Trainer.train(n)` runs n cycles in a `tf.while_loop` within one `tf.function`, so Python
overhead is paid once per call rather than once per update. Each cycle is `cycle.run_cycle`,
the schedule the Keras fit step runs too, in cross-replica context: each update draws its real
batch with `next(iterator)`, takes the noise key `run_cycle` derives from the step
(`phases.update_seed`), then calls `strategy.run`. Metrics are averaged over *every* update of
the call (not only the last one), and the gradients of each phase's last update are kept when
asked, for histograms.
"""

from __future__ import annotations

import functools
from typing import Callable, NamedTuple, Sequence

import numpy as np
import tensorflow as tf

from trainers.engine import phases as phases_lib
from trainers.engine.cycle import cross_replica_cond, run_cycle
from trainers.engine.state import TrainingState
from trainers.engine.steps import make_replica_update, phase_variables, reported_metrics


class LoopOutput(NamedTuple):
    """Averages over the updates of one `train` call, and recorded gradients if asked for."""

    metrics: dict[str, float]
    gradients: dict[str, dict[str, np.ndarray]]


def _host_variable(like, name: str) -> tf.Variable:
    """A non-trainable host-side accumulator shaped like `like`."""
    return tf.Variable(tf.zeros(like.shape, like.dtype), trainable=False,
                       name=name.replace("/", "_").replace(":", "_"))


class Trainer:
    """Runs the phases of a setup under a strategy.

    Args:
      strategy: the distribution strategy the models and optimizers were created under.
      state: the training state; its optimizers are keyed by optimizer name
        (`phases.phase_optimizer_names`: the phase's name unless the phase names others).
      phases: the ordered phases of one cycle.
      make_dataset: ``make_dataset(global_batches_done) -> distributed dataset`` positioned
        after the given number of global batches (a distributed iterator cannot be
        checkpointed, so the position is recomputed from the restored step).
      global_batch_size: real examples per update over all replicas.
      seed: the run's seed; every update's noise is derived from it and the step.
      jit_compile: compile each update's loss and gradients with XLA (see
        `steps.make_replica_update` for what is and is not compiled).
    """

    def __init__(
        self,
        *,
        strategy: tf.distribute.Strategy,
        state: TrainingState,
        phases: Sequence[phases_lib.Phase],
        make_dataset: Callable[[int], tf.distribute.DistributedDataset],
        global_batch_size: int,
        seed: int,
        jit_compile: bool = False,
    ):
        phases_lib.validate_phases(phases, list(state.models))
        missing = sorted({name for p in phases for name in phases_lib.phase_optimizer_names(p)}
                         - set(state.optimizers))
        if missing:
            raise ValueError(f"No optimizer named {missing}; optimizers are keyed by optimizer "
                             "name (a phase's own name unless it sets Phase.optimizers).")
        self.strategy = strategy
        self.state = state
        # The compiled loop is traced without AutoGraph: the engine's branches are tf.cond and
        # its loop a tf.while_loop, and converting the engine's own source was a third of a
        # tiny DCGAN's first trace. The setup's functions are still converted.
        self.phases = tuple(phases_lib.autographed(phase) for phase in phases)
        self.global_batch_size = global_batch_size
        self.seed = seed
        self._make_dataset = make_dataset
        self._iterator = None
        # Accumulators exist before the first trace, so the loop is traced exactly once. One
        # vector per phase (its metrics' sums in `_keys` order, then its update count): an update
        # adds to it with one op, and `train` reads it with one.
        self._keys = {phase.name: reported_metrics(phase, state.optimizers) for phase in self.phases}
        self._sums = {name: _host_variable(tf.zeros([len(keys) + 1]), f"{name}/sums")
                      for name, keys in self._keys.items()}
        self._gradients = {phase.name: [_host_variable(v, f"{phase.name}/gradient")
                                        for v in phase_variables(phase, state.models)]
                           for phase in self.phases}
        self._updates = {
            phase.name: make_replica_update(
                phase,
                models=state.models,
                optimizers=state.optimizers,
                global_batch_size=global_batch_size,
                num_replicas=strategy.num_replicas_in_sync,
                jit_compile=jit_compile,
            )
            for phase in self.phases
        }
        self._loop = tf.function(self._loop_fn, autograph=False)

    def _iterator_from_step(self):
        """A fresh iterator positioned where the restored step left the data."""
        done = phases_lib.batches_after(self.phases, int(self.state.step.numpy()))
        return iter(self._make_dataset(done))

    def train(self, num_cycles: int, *, record_gradients: bool = False) -> LoopOutput:
        """Runs `num_cycles` cycles and returns metrics averaged over their updates."""
        if num_cycles < 1:
            raise ValueError(f"num_cycles={num_cycles} must be >= 1.")
        if self._iterator is None:
            self._iterator = self._iterator_from_step()
        for variable in self._sums.values():
            variable.assign(tf.zeros_like(variable))
        self._loop(self._iterator, tf.constant(num_cycles, tf.int64), tf.constant(record_gradients))
        metrics = {}
        for name, keys in self._keys.items():
            *totals, count = (float(value) for value in self._sums[name].numpy())
            if count > 0:
                metrics.update({f"{name}/{key}": total / count for key, total in zip(keys, totals)})
        gradients = {}
        if record_gradients:
            for phase in self.phases:
                variables = phase_variables(phase, self.state.models)
                gradients[phase.name] = {
                    v.path: slot.numpy() for v, slot in zip(variables, self._gradients[phase.name])}
        return LoopOutput(metrics=metrics, gradients=gradients)

    @property
    def traces(self) -> int:
        """How many times the compiled loop was traced (1 when nothing forced a retrace)."""
        return self._loop.experimental_get_tracing_count()

    def loop_graph(self) -> tf.Graph:
        """The traced graph of the compiled loop, as `train` runs it (to count its FLOPs)."""
        if self._iterator is None:
            raise RuntimeError("loop_graph() needs the loop traced: call train() first.")
        return self._loop.get_concrete_function(
            self._iterator, tf.constant(1, tf.int64), tf.constant(False)).graph

    def reset_input(self) -> None:
        """Forgets the iterator so the next call repositions the data from the step."""
        self._iterator = None

    def _loop_fn(self, iterator, num_cycles, record_gradients):
        def cycle(index):
            record = tf.logical_and(record_gradients, tf.equal(index, num_cycles - 1))
            update = functools.partial(self._update, iterator=iterator, record=record)
            run_cycle(self.phases, self.state.step.read_value(), self.seed, update,
                      run_if=cross_replica_cond)
            self.state.step.assign_add(1)
            return (index + 1,)

        tf.while_loop(lambda index: index < num_cycles, cycle, (tf.constant(0, tf.int64),))

    def _update(self, phase: phases_lib.Phase, repeat: int, cycle: tf.Tensor, seed: tf.Tensor, *,
                iterator, record: tf.Tensor) -> None:
        """One update of `phase` on the next real batch; its metrics join the call's sums."""
        strategy = self.strategy
        real = next(iterator) if phase.uses_data else None
        result = strategy.run(self._updates[phase.name], args=(real, seed, cycle))
        values = {key: strategy.reduce(tf.distribute.ReduceOp.SUM, value, axis=None)
                  for key, value in result.shares.items()}
        values.update({key: strategy.experimental_local_results(value)[0]
                       for key, value in result.replicated.items()})
        keys = self._keys[phase.name]
        unknown = sorted(set(values) - set(keys))
        if unknown:
            raise ValueError(f"Phase {phase.name!r} reported metrics {unknown} that are not "
                             f"among {list(keys)}.")
        added = [tf.cast(values[key], tf.float32) if key in values else tf.constant(0.0)
                 for key in keys]
        self._sums[phase.name].assign_add(tf.stack([*added, tf.constant(1.0)]))
        if phase.after_update is not None:
            phase.after_update(self.state.models, cycle)
        if repeat == phase.repeats - 1:
            self._record_gradients(phase, result.gradients, record)

    def _record_gradients(self, phase, gradients, record):
        local = [self.strategy.experimental_local_results(g)[0] for g in gradients]
        slots = self._gradients[phase.name]

        def assign():
            for slot, gradient in zip(slots, local):
                slot.assign(gradient)

        cross_replica_cond(record, assign)
