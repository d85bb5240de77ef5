import math

import numpy as np
import pytest
import tensorflow as tf

from trainers.engine import schedules
from trainers.engine.distribution import make_strategy


def factors(kind, steps, total, warmup=0):
    return [float(schedules.learning_rate_factor(kind, s, total=total, warmup=warmup)) for s in steps]


def test_constant_linear_cosine_closed_forms():
    assert factors("constant", [0, 5, 10, 20], 10) == [1.0, 1.0, 1.0, 1.0]
    np.testing.assert_allclose(factors("linear", [0, 5, 10, 20], 10), [1.0, 0.5, 0.0, 0.0])
    np.testing.assert_allclose(factors("cosine", [0, 5, 10], 10),
                               [1.0, 0.5 * (1 + math.cos(math.pi / 2)), 0.0], atol=1e-7)


def test_without_a_total_only_the_constant_rate_is_defined():
    np.testing.assert_allclose(factors("constant", [0, 1, 3, 10**7], None, warmup=4),
                               [0.25, 0.5, 1.0, 1.0])
    for kind in ("linear", "cosine"):
        with pytest.raises(ValueError, match=f"a {kind} schedule decays to 0 at the run's end, "
                                             "which neither a total nor a time progress gives"):
            schedules.learning_rate_factor(kind, 0, total=None)


def test_under_a_time_budget_the_rate_follows_the_further_of_the_two_progresses():
    def factor(kind, step, total, used):
        return float(schedules.learning_rate_factor(kind, step, total=total, time_progress=used))

    # Time alone: the share of --train_time used.
    assert [factor("linear", 10**6, None, used) for used in (0.0, 0.25, 1.0)] == [1.0, 0.75, 0.0]
    assert factor("cosine", 3, None, 0.5) == pytest.approx(0.5)
    # Both limits: whichever is further along (the one that will end the run first).
    assert factor("linear", 5, 10, 0.25) == pytest.approx(0.5)
    assert factor("linear", 2, 10, 0.6) == pytest.approx(0.4)
    assert factor("constant", 5, None, 0.9) == 1.0


def test_a_phase_rate_reads_the_time_progress_variable_inside_a_compiled_function():
    used = tf.Variable(0.0)
    rate = schedules.PhaseLearningRate(base=0.1, kind="linear", total=None, time_progress=used)
    compiled = tf.function(lambda: rate(tf.constant(7, tf.int64)))
    values = []
    for share in (0.0, 0.5, 0.9):
        used.assign(share)
        values.append(float(compiled()))
    np.testing.assert_allclose(values, [0.1, 0.05, 0.01], rtol=1e-6)
    assert compiled.experimental_get_tracing_count() == 1


def test_inverse_sqrt_holds_the_rate_then_falls_as_the_inverse_square_root_without_an_end():
    def factor(step, hold=4, warmup=0, total=None, used=None):
        return float(schedules.learning_rate_factor("inverse_sqrt", step, total=total,
                                                    warmup=warmup, hold=hold, time_progress=used))

    # the first `hold` updates (0..3) at the full rate, then sqrt(hold / (step + 1))
    np.testing.assert_allclose([factor(s) for s in (0, 3, 4, 15, 63, 10**6 - 1)],
                               [1.0, 1.0, math.sqrt(4 / 5), 0.5, 0.25, math.sqrt(4e-6)], rtol=1e-6)
    assert factor(100, total=10) == factor(100, used=0.9) == factor(100)  # an end changes nothing
    assert factor(1, warmup=4) == 0.5  # the warm-up multiplies it like any shape
    with pytest.raises(ValueError, match="an inverse_sqrt schedule holds its rate for hold=0 updates"):
        factor(0, hold=0)


def test_warmup_ramps_then_follows_the_shape():
    np.testing.assert_allclose(factors("constant", [0, 1, 3, 7], 100, warmup=4), [0.25, 0.5, 1.0, 1.0])
    np.testing.assert_allclose(factors("linear", [1], 10, warmup=4), [0.5 * 0.9])


def test_bad_schedule_arguments():
    with pytest.raises(ValueError, match="'step'"):
        schedules.learning_rate_factor("step", 0, total=10)
    with pytest.raises(ValueError, match="total=0"):
        schedules.learning_rate_factor("linear", 0, total=0)


def test_linear_ramp():
    assert [float(schedules.linear_ramp(c, 4)) for c in (0, 1, 4, 9)] == [0.0, 0.25, 1.0, 1.0]
    assert float(schedules.linear_ramp(tf.constant(3, tf.int64), 0)) == 1.0


def test_phase_learning_rate_scales_inside_an_optimizer():
    rate = schedules.PhaseLearningRate(base=0.1, kind="linear", total=4)
    optimizer = tf.keras.optimizers.SGD(rate)
    variable = tf.Variable(1.0)
    optimizer.build([variable])
    assert float(optimizer.learning_rate) == pytest.approx(0.1)
    optimizer.apply([tf.constant(1.0)], [variable])
    assert float(variable) == pytest.approx(0.9)
    assert float(optimizer.learning_rate) == pytest.approx(0.075)
    rate.scale.assign(0.5)
    assert float(optimizer.learning_rate) == pytest.approx(0.0375)


def test_top_k_fraction_falls_linearly_to_its_final_value():
    fractions = [float(schedules.top_k_fraction(c, 0.5, 100)) for c in (0, 50, 100, 1000)]
    assert fractions == pytest.approx([1.0, 0.75, 0.5, 0.5])
    assert float(schedules.top_k_fraction(0, 0.6, 0)) == pytest.approx(0.6)
    assert float(schedules.top_k_fraction(tf.constant(7), 1.0, 10)) == 1.0


def test_ramped_weight_moves_from_start_to_a_variable_end():
    end = tf.Variable(0.5)
    assert [float(schedules.ramped_weight(c, 1.0, end, 4)) for c in (0, 2, 4, 8)] == [1.0, 0.75, 0.5, 0.5]
    end.assign(0.0)  # assigning the end moves the rest of the ramp
    assert float(schedules.ramped_weight(tf.constant(2, tf.int64), 1.0, end, 4)) == 0.5
    assert float(schedules.ramped_weight(3, 1.0, end, 0)) == 0.0


def test_the_time_progress_assigned_on_the_host_reaches_every_replica():
    strategy = make_strategy("mirrored", cpu_replicas=2)
    with strategy.scope():  # where building.train_time_progress and the schedules are created
        used = tf.Variable(0.0, trainable=False)
        rate = schedules.PhaseLearningRate(base=0.1, kind="linear", total=None, time_progress=used)
    step = tf.function(lambda: strategy.run(lambda: rate(tf.constant(0, tf.int64))))
    used.assign(0.75)  # as the controller does, outside the scope, before a loop
    per_replica = strategy.experimental_local_results(step())
    np.testing.assert_allclose([float(rate) for rate in per_replica], [0.025, 0.025], rtol=1e-6)


# -- R3GAN's schedules over a run's progress ---------------------------------------------------

@pytest.mark.parametrize("step, total, time_share, expected", [
    (0, 100, None, 0.0), (25, 100, None, 0.25), (100, 100, None, 1.0), (250, 100, None, 1.0),
    (25, 100, 0.6, 0.6), (80, 100, 0.6, 0.8), (5, None, 0.3, 0.3), (5, None, 1.5, 1.0)])
def test_run_progress_is_the_further_of_steps_and_time_used(step, total, time_share, expected):
    time_progress = None if time_share is None else tf.Variable(time_share)
    assert float(schedules.run_progress(step, total=total, time_progress=time_progress)) == \
        pytest.approx(expected)


def test_run_progress_needs_an_end():
    with pytest.raises(ValueError, match="neither given"):
        schedules.run_progress(3, total=None)


def test_cosine_between_closed_form():
    got = [float(schedules.cosine_between(p, 0.9, 0.99)) for p in (0.0, 0.25, 0.5, 1.0)]
    np.testing.assert_allclose(got, [0.9, 0.99 - 0.09 * 0.5 * (1 + math.cos(math.pi / 4)), 0.945, 0.99],
                               rtol=1e-6)


class ScheduledAdam(schedules.ScheduledBeta2, tf.keras.optimizers.Adam):
    pass


@pytest.mark.parametrize("step, expected", [(0, 0.9), (50, 0.945), (100, 0.99), (400, 0.99)])
def test_scheduled_beta2_at_given_updates(step, expected):
    optimizer = ScheduledAdam(1e-3, beta_1=0.0, beta_2=0.9, beta_2_final=0.99, total=100)
    assert float(optimizer.beta_2_at(step)) == pytest.approx(expected, rel=1e-6)


def test_scheduled_beta2_follows_the_time_budget():
    share = tf.Variable(0.5)
    optimizer = ScheduledAdam(1e-3, beta_1=0.0, beta_2=0.9, beta_2_final=0.99, total=None,
                              time_progress=share)
    assert float(optimizer.beta_2_at(1)) == pytest.approx(0.945, rel=1e-6)
    share.assign(1.0)
    assert float(optimizer.beta_2_at(1)) == pytest.approx(0.99, rel=1e-6)


def test_scheduled_beta2_is_the_beta2_of_each_adam_update():
    """Two updates at total 2: beta_2 0.9 then 0.945 in the second moment and its bias
    correction (beta_1 0: m is the gradient); the optimizer's beta_2 stays the constant."""
    variable = tf.Variable([1.0, -2.0])
    optimizer = ScheduledAdam(0.1, beta_1=0.0, beta_2=0.9, beta_2_final=0.99, total=2, epsilon=1e-7)
    gradients = [np.array([0.5, -1.0]), np.array([2.0, 0.25])]
    v, expected = np.zeros(2), np.array([1.0, -2.0])
    for t, (gradient, beta2) in enumerate(zip(gradients, (0.9, 0.945)), start=1):
        optimizer.apply_gradients([(tf.constant(gradient, tf.float32), variable)])
        v = beta2 * v + (1 - beta2) * gradient**2
        expected = expected - 0.1 * math.sqrt(1 - beta2**t) * gradient / (np.sqrt(v) + 1e-7)
    np.testing.assert_allclose(variable.numpy(), expected, rtol=1e-5)
    assert optimizer.beta_2 == 0.9
