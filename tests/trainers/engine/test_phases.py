import pytest

from trainers.engine import phases as phases_lib
from trainers.engine.phases import Phase


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


def test_runs_in_cycle_on_a_tensor_cycle():
    import tensorflow as tf

    lazy = Phase(name="r1", models=("discriminator",), loss=_loss, every=4)
    runs = [phases_lib.runs_in_cycle(lazy, tf.constant(c, tf.int64)) for c in range(6)]
    assert all(tf.is_tensor(r) and r.dtype == tf.bool for r in runs)
    assert [bool(r) for r in runs] == [True, False, False, False, True, False]
    # a phase of every cycle needs no condition in the compiled step
    assert phases_lib.runs_in_cycle(_gan(1)[0], tf.constant(3, tf.int64)) is True


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


@pytest.mark.parametrize("kwargs, message", [
    (dict(optimizers=("x",)), "one optimizer per model"),
    (dict(optimizers=("x", "")), "optimizer name ''"),
    (dict(optimizers=("x", "y/z")), "optimizer name 'y/z'"),
    (dict(models=("a", "a")), "lists a model twice"),
    (dict(optimizers=("x", "y"), metrics=("grad_norm_y",)), r"\['grad_norm_y'\] are reserved"),
    (dict(per_model_losses=True, metrics=("loss_b",)), r"\['loss_b'\] are reserved"),
    (dict(metrics=("learning_rate",)), r"\['learning_rate'\] are reserved"),
    (dict(optimizers=("x", "y"), metrics=("loss_scale_x",)), r"\['loss_scale_x'\] are reserved"),
])
def test_multi_optimizer_phase_validation(kwargs, message):
    arguments = dict(name="p", models=("a", "b"), loss=_loss) | kwargs
    with pytest.raises(ValueError, match=message):
        Phase(**arguments)


def test_optimizer_names_and_the_metric_names_they_give():
    default = Phase(name="p", models=("a", "b"), loss=_loss, metrics=("grad_norm_b",))
    assert phases_lib.phase_optimizer_names(default) == ("p", "p")
    one = Phase(name="p", models=("a", "b"), optimizers=("x", "x"), loss=_loss)
    assert phases_lib.distinct_optimizers(one) == ("x",)
    assert phases_lib.update_metric_names(one) == (
        "loss", "grad_norm", "learning_rate", "nonfinite", "loss_scale")
    assert phases_lib.update_metric_names(one, loss_scaled=()) == (
        "loss", "grad_norm", "learning_rate", "nonfinite")
    two = Phase(name="p", models=("a", "b"), optimizers=("x", "y"), loss=_loss, per_model_losses=True)
    assert phases_lib.update_metric_names(two) == (
        "loss", "loss_a", "loss_b", "grad_norm_x", "grad_norm_y", "learning_rate_x",
        "learning_rate_y", "nonfinite", "loss_scale_x", "loss_scale_y")
    assert phases_lib.update_metric_names(two, loss_scaled=("y", "other")) == (
        "loss", "loss_a", "loss_b", "grad_norm_x", "grad_norm_y", "learning_rate_x",
        "learning_rate_y", "nonfinite", "loss_scale_y")
    # the lazy penalty phase counts towards the discriminator optimizer's updates
    lazy = Phase(name="penalty", models=("discriminator",), loss=_loss, every=4,
                 optimizers=("discriminator",))
    phases = _gan(2) + (lazy,)
    assert phases_lib.optimizer_updates_after(phases, 10) == {"discriminator": 20 + 3, "generator": 10}
    assert phases_lib.optimizer_models(phases) == {"discriminator": ("discriminator",),
                                                   "generator": ("generator",)}


def _inputs(global_batch_size, replica_batch_size):
    import tensorflow as tf

    return phases_lib.StepInputs(real=None, seed=tf.constant([0, 0], tf.int64),
                                 global_batch_size=global_batch_size,
                                 replica_batch_size=replica_batch_size, replica_index=0)


def test_mean_is_a_share_of_the_global_batch_mean():
    import tensorflow as tf

    share = _inputs(8, 4).mean(tf.constant([1.0, 2.0, 3.0, 6.0]))

    assert float(share) == pytest.approx(12.0 / 8)


def test_mean_of_per_pack_values_averages_over_the_global_packs():
    import tensorflow as tf

    # 4 examples per replica in packs of 2 give 2 values; 8 global examples are 4 packs.
    share = _inputs(8, 4).mean(tf.constant([1.0, 3.0]))

    assert float(share) == pytest.approx(4.0 / 4)


def test_mean_refuses_rows_that_do_not_split_the_batch():
    import tensorflow as tf

    with pytest.raises(ValueError, match="3 rows"):
        _inputs(8, 4).mean(tf.constant([1.0, 2.0, 3.0]))


def test_noise_is_philox_and_equals_the_default_algorithm_outside_xla():
    import numpy as np
    import tensorflow as tf

    inputs = _inputs(8, 8)
    seed = tf.random.experimental.stateless_fold_in(inputs.seed, 3)

    assert phases_lib.RNG_ALGORITHM == "philox"
    np.testing.assert_array_equal(inputs.normal([5], salt=3),
                                  tf.random.stateless_normal([8, 5], seed=seed))


@pytest.mark.parametrize("xla", [False, True])
def test_draws_are_tensorflows_philox_draws_in_a_graph_and_under_xla(xla):
    import dataclasses

    import numpy as np
    import tensorflow as tf

    # A seed with high bits set: under XLA, StatelessRandomGetKeyCounter derives other keys from
    # such seeds, so there `StepInputs` must keep TensorFlow's own scrambling.
    inputs = dataclasses.replace(_inputs(8, 8), seed=tf.constant([123456789012, -5], tf.int64),
                                 xla=xla)

    @tf.function(jit_compile=xla)
    def draws():
        seed = tf.random.experimental.stateless_fold_in(inputs.seed, 3)
        return (inputs.normal([5], salt=3), inputs.uniform([2, 3], salt=3),
                tf.random.stateless_normal([8, 5], seed=seed, alg="philox"),
                tf.random.stateless_uniform([8, 2, 3], seed=seed, alg="philox"))

    normal, uniform, expected_normal, expected_uniform = draws()

    np.testing.assert_array_equal(normal, expected_normal)
    np.testing.assert_array_equal(uniform, expected_uniform)


def test_a_graph_draw_derives_its_philox_key_in_one_op_and_mean_asserts_nothing():
    import tensorflow as tf

    inputs = _inputs(8, 8)
    graph = tf.function(lambda: inputs.mean(inputs.normal([5]))).get_concrete_function().graph
    op_types = [op.type for op in graph.get_operations()]

    # stateless_fold_in for the salt, then one key derivation for the draw.
    assert op_types.count("StatelessRandomGetKeyCounter") == 2
    assert "Assert" not in op_types
    with pytest.raises(ValueError, match="at least one axis"):
        inputs.mean(tf.constant(1.0))
