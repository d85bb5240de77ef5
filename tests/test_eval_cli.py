"""Evaluation through run.py: train a (small) domain evaluator, evaluate a run, evaluate during
training and keep the best checkpoint, the real-vs-real floor, and toy mode metrics."""

import json
import shutil

import pytest
import tensorflow as tf

from datasets import registry
from gan import evaluation
from tests.cli import TINY, run, run_together
from trainers.config.flags import Config
from trainers.modes import evaluate, plot
from trainers.outputs import hparams, summaries


@pytest.fixture(scope="module")
def evaluator_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("evaluators")
    result = run("--mode=train_evaluator", f"--evaluator_dir={directory}", "--evaluator_epochs=1",
                 "--evaluator_train_examples=2000")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "test accuracy" in result.stdout
    assert (directory / "fashion_mnist-28" / "evaluator.json").exists()
    return directory


@pytest.fixture(scope="module")
def evaluated_run(tmp_path_factory, evaluator_dir):
    logdir = tmp_path_factory.mktemp("eval") / "run"
    result = run(*TINY, f"--logdir={logdir}", "--train_cycles=4", "--checkpoint_every=2", "--image_every=0",
                 "--histogram_every=0", "--eval_every=2", "--eval_samples=100", f"--evaluator_dir={evaluator_dir}")
    assert result.returncode == 0, result.stderr[-3000:]
    return logdir


def evaluator_record(directory):
    """The checksum the domain evaluator's record holds."""
    return json.loads((directory / "fashion_mnist-28" / "evaluator.json").read_text())["fingerprint"]


def last_json(stdout):
    return json.loads(stdout.strip().splitlines()[-1])


def test_eval_every_logs_metrics_and_keeps_the_best_checkpoint(evaluated_run):
    tags = summaries.read_event_tags(str(evaluated_run))["scalars"]
    assert {"eval/fid_domain", "eval/kid_domain", "eval/precision_domain", "eval/recall_domain",
            "eval/inception_score_domain", "eval/coverage_domain"} <= tags
    # The training's own event file: LOGDIR/eval/ holds what --mode=eval adds later.
    logged = [(step, float(tf.make_ndarray(value.tensor)))
              for step, value in summaries.summary_values(str(evaluated_run), recursive=False)
              if value.tag == "eval/fid_domain"]
    assert [step for step, _ in logged] == [2, 4]
    fids = dict(logged)
    best = json.loads((evaluated_run / "checkpoints_best" / "best.json").read_text())
    assert best["step"] in (2, 4) and best["fid_domain"] == pytest.approx(min(fids.values()), rel=1e-5)


def test_a_resume_measuring_fid_on_another_sample_count_is_refused_before_training(
        evaluated_run, evaluator_dir, tmp_path):
    """A 50-image FID is not comparable with the 100-image ones best.json ranks by."""
    logdir = shutil.copytree(evaluated_run, tmp_path / "run")
    result = run(*TINY, f"--logdir={logdir}", "--train_cycles=6", "--checkpoint_every=2",
                 "--image_every=0", "--histogram_every=0", "--eval_every=2", "--eval_samples=50",
                 f"--evaluator_dir={evaluator_dir}")
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-3000:]
    best = logdir / "checkpoints_best"
    assert result.stderr.strip().splitlines()[-1] == (
        f"error: {best}/best.json ranks the best checkpoint by values measured with "
        "eval_samples=100; this run measures with eval_samples=50, and the two do not compare. "
        f"Resume with the flags that measured it, or move {best} away to start a new best record.")
    assert tf.train.latest_checkpoint(str(logdir / "checkpoints")).endswith("ckpt-4")
    assert json.loads((best / "best.json").read_text())["basis"] == {
        "evaluator": "domain", "evaluator_checksum": evaluator_record(evaluator_dir),
        "eval_samples": 100}


def test_the_run_is_one_row_of_the_hparams_dashboard(evaluated_run):
    """run.py wrote the resolved flags as hparams and the metric columns its evaluations fill."""
    record = hparams.read_hparams(str(evaluated_run))
    assert {"setup": "dcgan", "batch_size": 16.0, "g_width": 8.0, "train_cycles": 4.0,
            "eval_samples": 100.0, "loss": "non_saturating", "use_ema": True}.items() <= record.values.items()
    assert not {"logdir", "mode", "evaluator_dir", "image_every", "output"} & set(record.values)
    written = summaries.read_event_tags(str(evaluated_run))["scalars"]
    columns = {tag for group, tag in record.metrics if group == ""}
    assert {tag for tag in written if tag.startswith("eval/")} <= columns


def test_mode_eval_of_the_best_checkpoint_repeats_the_metrics_recorded_with_it(evaluated_run,
                                                                               evaluator_dir):
    """The same weights, evaluation seed, sample count and evaluator give the metrics the run
    recorded when it kept that checkpoint."""
    result = run("--mode=eval", f"--logdir={evaluated_run}", "--eval_samples=100",
                 f"--evaluator_dir={evaluator_dir}", "--checkpoint=best")
    assert result.returncode == 0, result.stderr[-3000:]
    metrics = last_json(result.stdout)
    best = json.loads((evaluated_run / "checkpoints_best" / "best.json").read_text())
    assert metrics["step"] == best["step"] and metrics["num_samples"] == 100
    assert metrics["checkpoint"].endswith(f"ckpt-{best['step']}")
    assert metrics["features"] == {"name": "domain", "checksum": evaluator_record(evaluator_dir),
                                   "network": f"domain evaluator {evaluator_dir}/fashion_mnist-28"}
    for metric in ("fid", "kid", "inception_score", "precision", "recall", "coverage"):
        key = f"{metric}_domain"
        assert metrics[key] == pytest.approx(best[key], rel=1e-5), key
    # ...and are in TensorBoard, at the checkpoint's step, in the run's eval/ directory.
    [(step, fid)] = summaries.read_scalars(str(evaluated_run / "eval"), "eval/fid_domain")
    assert step == best["step"] and fid == pytest.approx(metrics["fid_domain"], rel=1e-6)


def test_plot_draws_the_trainings_evaluations_and_those_of_mode_eval(evaluated_run, evaluator_dir,
                                                                      tmp_path):
    """Read from the run's real event files: the --eval_every metrics and, labelled apart,
    those --mode=eval of a kept step added to LOGDIR/eval/ (of a copy: the other tests read
    the shared run's eval/ as the one test that writes it left it)."""
    logdir = shutil.copytree(evaluated_run, tmp_path / "run")
    evaluate.evaluate(Config(mode="eval", logdir=str(logdir), eval_samples=100,
                             evaluator_dir=str(evaluator_dir), checkpoint="2"))
    drawn = plot.plot_curves(str(logdir), str(tmp_path / "curves.png"))
    assert {"eval/fid_domain", "eval/kid_domain", "eval/inception_score_domain",
            "eval: coverage_domain, precision_domain, recall_domain"} <= set(drawn)
    assert drawn["eval/fid_domain"] == ["fid_domain", "fid_domain (--mode=eval)"]
    assert drawn["eval/kid_domain"] == ["kid_domain", "kid_std_domain", "kid_domain (--mode=eval)",
                                        "kid_std_domain (--mode=eval)"]
    # Equal curves share a label.
    fractions = " = ".join(drawn["eval: coverage_domain, precision_domain, recall_domain"])
    assert "recall_domain (--mode=eval)" in fractions and "precision_domain (--mode=eval)" in fractions
    assert not [label for labels in drawn.values() for label in labels if "num_samples" in label]


def test_real_vs_real_is_the_floor(evaluated_run, evaluator_dir):
    flags = ["--mode=eval", f"--logdir={evaluated_run}", "--eval_samples=100",
             f"--evaluator_dir={evaluator_dir}"]
    eval_run = evaluated_run / "eval"
    before = len(summaries.read_scalars(str(eval_run), "eval/fid_domain")) if eval_run.exists() else 0
    floor, model = (last_json(result.stdout)
                    for result in run_together([*flags, "--real_vs_real"], flags))
    assert floor["real_vs_real"] is True
    assert floor["fid_domain"] < model["fid_domain"]
    # The floor is not the run's: only the checkpoint's evaluation is added to its eval/ run.
    assert len(summaries.read_scalars(str(eval_run), "eval/fid_domain")) == before + 1


def test_missing_evaluator_names_the_mode_that_trains_it(evaluated_run, tmp_path):
    result = run("--mode=eval", f"--logdir={evaluated_run}", f"--evaluator_dir={tmp_path}")
    assert result.returncode == 2
    assert "--mode=train_evaluator" in result.stderr


def test_toy_eval_scores_the_generator_it_restores(tmp_path):
    """--mode=eval's mode metrics equal `evaluate_toy_generator` on the same checkpoint's
    generator (through its export), with the same seed."""
    logdir = tmp_path / "ring"
    trained = run("--dataset=ring8", "--batch_size=32", "--latent_dim=4", f"--logdir={logdir}",
                  "--train_cycles=2", "--cycles_per_loop=2", "--image_every=0", "--histogram_every=0")
    assert trained.returncode == 0, trained.stderr[-2000:]
    evaluated, exported = run_together(
        ["--mode=eval", f"--logdir={logdir}"],
        ["--mode=export", f"--logdir={logdir}", f"--export_dir={tmp_path / 'export'}"])
    assert evaluated.returncode == 0, evaluated.stderr[-2000:]
    assert exported.returncode == 0, exported.stderr[-2000:]
    metrics = last_json(evaluated.stdout)
    generator = tf.saved_model.load(str(tmp_path / "export" / "generator" / "2"))
    info = registry.dataset_info("ring8")
    expected = evaluation.evaluate_toy_generator(
        lambda noise: generator.signatures["serving_default"](noise=noise)["points"],
        latent_shape=(4,), modes=info.modes, std=info.mode_std, seed=0)
    assert metrics["modes"] == expected["modes"]
    assert metrics["high_quality"] == pytest.approx(expected["high_quality"], abs=1e-9)
    assert metrics["num_samples"] == evaluation.TOY_SAMPLES  # whatever --eval_samples is


def test_the_standard_inception_features_name_every_metric_and_record_the_graph(
        evaluated_run, tmp_path, monkeypatch):
    """--evaluator=inception on a stand-in with the graph's interface (its checksum taken as
    the standard one): every key names the features, the record names the graph and checksum,
    and TensorBoard gets the named tags beside the domain evaluator's."""
    from gan import inception
    from tests.gan.inception_stand_in import stand_in_sha256, write_stand_in

    graph, _ = write_stand_in(tmp_path)
    monkeypatch.setattr(inception, "GRAPH_SHA256", stand_in_sha256())
    logdir = shutil.copytree(evaluated_run, tmp_path / "run")
    results = evaluate.evaluate(Config(mode="eval", logdir=str(logdir), eval_samples=100,
                                       evaluator="inception", inception_graph=graph))
    assert results["features"] == {"name": "inception", "checksum": stand_in_sha256(),
                                   "network": f"Inception 2015-12-05 graph {graph}"}
    metrics = {"fid", "kid", "kid_std", "precision", "recall", "inception_score",
               "inception_score_std", "coverage", "class_kl"}
    assert {key for key in results if key.endswith("_inception")} == {
        f"{metric}_inception" for metric in metrics}
    assert not metrics & set(results) and results["fid_inception"] > 0
    assert {f"eval/{metric}_inception" for metric in metrics} <= summaries.read_event_tags(
        str(logdir / "eval"))["scalars"]


def test_a_graph_that_is_not_the_standard_one_is_refused_through_run_py(evaluated_run, tmp_path):
    from gan import inception
    from tests.gan.inception_stand_in import write_stand_in

    graph, _ = write_stand_in(tmp_path)
    result = run("--mode=eval", f"--logdir={evaluated_run}", "--evaluator=inception",
                 f"--inception_graph={graph}")
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert "is not the standard FID Inception graph" in result.stderr
    assert f"has {inception.GRAPH_SHA256}" in result.stderr
