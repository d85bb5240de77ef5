"""stacked_fashion_mnist through run.py: its evaluator is Fashion-MNIST's, a run trains and
reports the mode metrics with `--eval_every`, and `--mode=eval` repeats them for a checkpoint."""

import json
import math

import pytest

from tests.cli import TINY, run
from trainers.outputs import summaries

STACKED = "--dataset=stacked_fashion_mnist"


@pytest.fixture(scope="module")
def evaluator_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("evaluators")
    result = run("--mode=train_evaluator", STACKED, f"--evaluator_dir={directory}",
                 "--evaluator_epochs=1", "--evaluator_train_examples=2000")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Trained the fashion_mnist evaluator" in result.stdout
    assert "stacked_fashion_mnist classifies each channel with it" in result.stdout
    assert [path.name for path in directory.iterdir()] == ["fashion_mnist-28"]
    return directory


@pytest.fixture(scope="module")
def stacked_run(tmp_path_factory, evaluator_dir):
    logdir = tmp_path_factory.mktemp("stacked") / "run"
    result = run(*TINY, STACKED, f"--logdir={logdir}", "--train_cycles=4", "--checkpoint_every=2",
                 "--image_every=0", "--histogram_every=0", "--eval_every=2", "--eval_samples=100",
                 "--mode_samples=300", f"--evaluator_dir={evaluator_dir}")
    assert result.returncode == 0, result.stderr[-3000:]
    return logdir


def test_eval_every_logs_the_mode_metrics(stacked_run):
    for tag in ("eval/modes_domain", "eval/modes_kl_domain"):
        assert [step for step, _ in summaries.read_scalars(str(stacked_run), tag)] == [2, 4], tag
    best = json.loads((stacked_run / "checkpoints_best" / "best.json").read_text())
    assert 1 <= best["modes_domain"] <= 300
    assert 0 <= best["modes_kl_domain"] <= math.log(1000)


def test_mode_eval_repeats_the_mode_metrics_of_the_best_checkpoint(stacked_run, evaluator_dir):
    """Same weights, seed, sample count and evaluator: the counts the run recorded."""
    result = run("--mode=eval", f"--logdir={stacked_run}", "--eval_samples=100",
                 "--mode_samples=300", f"--evaluator_dir={evaluator_dir}", "--checkpoint=best")
    assert result.returncode == 0, result.stderr[-3000:]
    metrics = json.loads(result.stdout.strip().splitlines()[-1])
    best = json.loads((stacked_run / "checkpoints_best" / "best.json").read_text())
    assert (metrics["mode_samples"], metrics["num_samples"]) == (300, 100)
    assert metrics["modes_domain"] == best["modes_domain"]
    assert metrics["modes_kl_domain"] == pytest.approx(best["modes_kl_domain"], rel=1e-9)
    assert len(metrics) > 8  # the image metrics too
