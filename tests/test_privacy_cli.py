"""A differentially private dcgan through run.py: training prints the privacy spent and logs
`privacy/epsilon`, and --mode=eval's JSON reports the same epsilon for the checkpoint's step,
each equal to `dp-accounting`'s for the run's sampling rate, steps and noise; a resumed run
(through the Python API) counts the private updates made before it.

The domain evaluator is an untrained classifier written straight into the cache (the metrics'
values are not what is checked here).
"""

import shutil

import dp_accounting
import pytest
import tensorflow as tf

from datasets import fashion_mnist
from gan import evaluator
from tests.cli import TINY, run
from tests.gan.synthetic_evaluator import write_evaluator
from trainers import api
from trainers.config.flags import Config
from trainers.modes import evaluate
from trainers.outputs import summaries

NOISE, CLIP, BATCH, EXAMPLES = 1.1, 1.0, 16, fashion_mnist.NUM_TRAIN_EXAMPLES


def dp_epsilon(steps: int, delta: float = 1 / EXAMPLES) -> float:
    accountant = dp_accounting.rdp.RdpAccountant()
    accountant.compose(dp_accounting.SelfComposedDpEvent(dp_accounting.PoissonSampledDpEvent(
        BATCH / EXAMPLES, dp_accounting.GaussianDpEvent(NOISE)), steps))
    return accountant.get_epsilon(delta)


@pytest.fixture(scope="module")
def private_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("private")
    logdir = root / "run"
    result = run(*TINY, f"--logdir={logdir}", "--train_cycles=4", "--checkpoint_every=4",
                 "--image_every=0", "--histogram_every=0", f"--dp_l2_clip={CLIP}",
                 f"--dp_noise_multiplier={NOISE}", "--dp_microbatches=8")
    assert result.returncode == 0, result.stderr[-3000:]
    return root, logdir, result.stdout


def test_training_prints_and_logs_the_epsilon_spent(private_run):
    _, logdir, stdout = private_run
    assert (f"Privacy spent: epsilon={dp_epsilon(4):.4g} at delta={1 / EXAMPLES:.3g} (noise "
            f"multiplier 1.1, L2 clip 1, sampling rate {BATCH / EXAMPLES:.4g}, 4 private updates)"
            in stdout)
    logged = {step: float(tf.make_ndarray(value.tensor))
              for step, value in summaries.summary_values(str(logdir), recursive=False)
              if value.tag == "privacy/epsilon"}
    assert logged == pytest.approx({2: dp_epsilon(2), 4: dp_epsilon(4)}, rel=1e-6)


def test_eval_reports_the_privacy_of_the_checkpoint(private_run):
    root, logdir, _ = private_run
    cache = root / "evaluators"
    write_evaluator(evaluator.build_classifier(input_shape=(28, 28, 1), num_classes=10, width=4,
                                               feature_dim=16), str(cache))
    results = evaluate.evaluate(Config(mode="eval", logdir=str(logdir), eval_samples=16,
                                       evaluator_dir=str(cache)))
    assert results["step"] == 4
    assert results["privacy"] == {
        "epsilon": pytest.approx(dp_epsilon(4), rel=1e-9), "delta": 1 / EXAMPLES,
        "noise_multiplier": NOISE, "l2_clip": CLIP, "sampling_rate": BATCH / EXAMPLES,
        "steps": 4, "microbatches": 8}


def test_a_resumed_run_accounts_for_the_updates_before_it(private_run, tmp_path, capsys):
    # A copy, so the eval test above still sees the 4-step checkpoint; resumed in this process
    # (the Python API trains as run.py does), which spares a TensorFlow start-up.
    _, logdir, _ = private_run
    resumed = tmp_path / "run"
    shutil.copytree(logdir, resumed)
    trained = api.train(api.config(
        batch_size=BATCH, g_width=8, d_width=8, latent_dim=16, cycles_per_loop=2,
        shuffle_buffer=256, logdir=str(resumed), train_cycles=6, checkpoint_every=4,
        image_every=0, histogram_every=0, dp_l2_clip=CLIP, dp_noise_multiplier=NOISE,
        dp_microbatches=8))
    assert trained.step == 6
    stdout = capsys.readouterr().out
    assert f"Privacy spent: epsilon={dp_epsilon(6):.4g} " in stdout
    assert "6 private updates)" in stdout
