"""`benchmarks/lazy_penalty.py` times the run its results describe: the wgan_gp penalty in float32
with the paper's five critic updates per cycle, whatever the default precision and the preset's
critic updates are (the default `auto` trains in bfloat16 where it is native, which silently
changed the benchmark's arithmetic on such CPUs)."""

import pytest

from benchmarks import lazy_penalty


@pytest.mark.parametrize("every", [1, 4, 16])
def test_the_timed_run_is_float32_with_five_critic_updates(every):
    config = lazy_penalty.benchmark_config(every, cycles=16, seed=0)
    assert (config.setup, config.loss, config.penalty) == ("wgan_gp", "wasserstein", "gradient_penalty")
    assert (config.precision, config.d_updates, config.penalty_every) == ("float32", 5, every)
    assert (config.batch_size, config.g_width, config.d_width, config.cycles_per_loop) == (64, 64, 64, 16)
