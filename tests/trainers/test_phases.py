import pytest

from trainers import phases as phases_lib
from trainers.phases import Phase


def _loss(models, inputs):
    raise AssertionError("the schedule never calls losses")


def _gan(k, g=1):
    return (Phase(name="discriminator", models=("discriminator",), loss=_loss, repeats=k),
            Phase(name="generator", models=("generator",), loss=_loss, repeats=g, uses_data=False))


@pytest.mark.parametrize("k", [1, 2, 5])
def test_updates_and_batches_for_k_to_1(k):
    phases = _gan(k)
    assert phases_lib.updates_after(phases, 40) == {"discriminator": 40 * k, "generator": 40}
    assert phases_lib.batches_after(phases, 40) == 40 * k
    assert phases_lib.cycle_plan(phases, 3) == (
        [("discriminator", r) for r in range(k)] + [("generator", 0)])


def test_zero_cycles_means_no_updates():
    assert phases_lib.updates_after(_gan(5), 0) == {"discriminator": 0, "generator": 0}
    assert phases_lib.batches_after(_gan(5), 0) == 0


def test_lazy_phase_runs_on_multiples_of_every():
    lazy = Phase(name="r1", models=("discriminator",), loss=_loss, every=4)
    phases = _gan(1) + (lazy,)
    assert [phases_lib.runs_in_cycle(lazy, c) for c in range(6)] == [True, False, False, False, True, False]
    # cycles 0, 4 and 8 of 0..9
    assert phases_lib.updates_after(phases, 10)["r1"] == 3
    assert phases_lib.batches_after(phases, 10) == 10 + 3
    assert ("r1", 0) not in phases_lib.cycle_plan(phases, 5)


@pytest.mark.parametrize("kwargs, message", [
    (dict(repeats=0), "repeats=0"),
    (dict(every=0), "every=0"),
    (dict(models=()), "updates no model"),
    (dict(name="a/b"), "'a/b'"),
])
def test_phase_validation(kwargs, message):
    arguments = dict(name="d", models=("discriminator",), loss=_loss) | kwargs
    with pytest.raises(ValueError, match=message):
        Phase(**arguments)


def test_validate_phases_rejects_duplicates_and_unknown_models():
    with pytest.raises(ValueError, match="repeated"):
        phases_lib.validate_phases(_gan(1) + _gan(1)[:1], ["generator", "discriminator"])
    with pytest.raises(ValueError, match="unknown models"):
        phases_lib.validate_phases(_gan(1), ["generator"])


def test_update_seed_is_a_pure_function_of_seed_cycle_phase_and_repeat():
    import tensorflow as tf

    keys = {}
    for seed in (0, 1):
        for cycle in (0, 1, 7):
            for phase_index in (0, 1):
                for repeat in (0, 1):
                    key = phases_lib.update_seed(seed, tf.constant(cycle, tf.int64), phase_index, repeat)
                    assert key.shape == (2,) and key.dtype == tf.int64
                    keys[(seed, cycle, phase_index, repeat)] = tuple(key.numpy())
    assert len(set(keys.values())) == len(keys)
    again = phases_lib.update_seed(1, tf.Variable(7, dtype=tf.int64), 1, 0)
    assert tuple(again.numpy()) == keys[(1, 7, 1, 0)]
