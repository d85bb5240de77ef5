"""`cycle.run_cycle`: the updates of one cycle, in Python and compiled, against the schedule."""

import pytest
import tensorflow as tf

from trainers.engine import phases as phases_lib
from trainers.engine.cycle import cross_replica_cond, run_cycle
from trainers.engine.phases import Phase, update_seed

SEED = 7


def _loss(models, inputs):
    raise AssertionError("run_cycle never calls losses")


# k=2 discriminator updates, a lazy data phase of 2 updates every 3rd cycle, then the generator.
PHASES = (Phase(name="discriminator", models=("discriminator",), loss=_loss, repeats=2),
          Phase(name="lazy", models=("discriminator",), loss=_loss, repeats=2, every=3),
          Phase(name="generator", models=("generator",), loss=_loss, uses_data=False))
NAMES = [phase.name for phase in PHASES]


def _no_condition(condition, fn, *args):
    raise AssertionError("a Python cycle needs no tensor condition")


def plan(cycle: int) -> list[tuple[str, int, tuple[int, int]]]:
    """The (phase, repeat, noise key) updates run_cycle makes in a Python-int `cycle`."""
    made = []

    def update(phase, repeat, update_cycle, seed):
        assert update_cycle == cycle
        made.append((phase.name, repeat, tuple(seed.numpy())))

    run_cycle(PHASES, cycle, SEED, update, run_if=_no_condition)
    return made


def test_a_cycle_makes_the_scheduled_updates_in_order_with_their_noise_keys():
    everything = []
    for cycle in range(7):
        lazy = [("lazy", 0), ("lazy", 1)] if cycle in (0, 3, 6) else []
        expected = [("discriminator", 0), ("discriminator", 1), *lazy, ("generator", 0)]
        made = plan(cycle)
        assert [(name, repeat) for name, repeat, _ in made] == expected
        assert [key for *_, key in made] == [
            tuple(update_seed(SEED, cycle, NAMES.index(name), repeat).numpy())
            for name, repeat in expected]
        everything += [key for *_, key in made]
    assert len(everything) == 7 * 3 + 3 * 2 and len(set(everything)) == len(everything)


@pytest.mark.parametrize("cycles, updates, batches", [
    (1, {"discriminator": 2, "lazy": 2, "generator": 1}, 4),
    (3, {"discriminator": 6, "lazy": 2, "generator": 3}, 8),
    (4, {"discriminator": 8, "lazy": 4, "generator": 4}, 12),
    (7, {"discriminator": 14, "lazy": 6, "generator": 7}, 20),
])
def test_the_updates_of_the_first_cycles_are_the_closed_form_counts(cycles, updates, batches):
    made = [name for cycle in range(cycles) for name, _, _ in plan(cycle)]
    assert {name: made.count(name) for name in NAMES} == updates == phases_lib.updates_after(PHASES, cycles)
    data = sum(made.count(phase.name) for phase in PHASES if phase.uses_data)
    assert data == batches == phases_lib.batches_after(PHASES, cycles)


def test_a_compiled_cycle_makes_the_same_updates_with_one_condition():
    """One trace serves every cycle; only the lazy phase is conditional."""
    log = tf.Variable(tf.zeros([8, 4], tf.int64))  # per update: phase index, repeat, noise key
    made = tf.Variable(0, dtype=tf.int64)

    def update(phase, repeat, cycle, seed):
        row = tf.concat([tf.constant([NAMES.index(phase.name), repeat], tf.int64), seed], 0)
        log.scatter_nd_update(tf.reshape(made, [1, 1]), row[None])
        made.assign_add(1)

    @tf.function
    def compiled(cycle):
        made.assign(0)
        run_cycle(PHASES, cycle, SEED, update, run_if=cross_replica_cond)
        return made.read_value()

    for cycle in range(7):
        count = int(compiled(tf.constant(cycle, tf.int64)))
        rows = log.numpy()[:count]
        assert [(NAMES[i], r, (a, b)) for i, r, a, b in rows] == plan(cycle)
    assert compiled.experimental_get_tracing_count() == 1
    graph = compiled.get_concrete_function(tf.TensorSpec([], tf.int64)).graph
    assert sum(op.type in ("If", "StatelessIf") for op in graph.get_operations()) == 1


def test_cross_replica_cond_runs_its_function_only_when_the_condition_holds():
    total = tf.Variable(0)

    @tf.function
    def add_if(condition, value):
        cross_replica_cond(condition, total.assign_add, value)

    for condition, value in ((True, 1), (False, 10), (True, 100)):
        add_if(tf.constant(condition), tf.constant(value))
    assert int(total.numpy()) == 101
