"""HParams output: what the event files hold, and what TensorBoard's hparams plugin serves from
them for a sweep of two runs (the way its dashboard asks)."""

import dataclasses
import os
import time

import pytest
import tensorflow as tf

from tests.cli import get_json, tensorboard
from trainers.config.flags import Config
from trainers.config.hparams import hparam_specs, hparam_values
from trainers.evaluation import tags
from trainers.modes import evaluate, train
from trainers.outputs import hparams, summaries
from trainers.setups import registry

STATUSES = ["STATUS_FAILURE", "STATUS_RUNNING", "STATUS_SUCCESS", "STATUS_UNKNOWN"]


def write_run(logdir, config, fids, *, after_training=None):
    """A run's HParams summaries as the train mode writes them at its start, `eval/fid_domain` at steps
    1, 2, ... as --eval_every logs it, and optionally --mode=eval's result at the last step."""
    writer = tf.summary.create_file_writer(str(logdir))
    with writer.as_default():
        hparams.write_experiment(hparam_specs(), train.comparison_metrics("domain"))
        hparams.write_session(hparam_values(config))
        for step, fid in enumerate(fids, start=1):
            summaries.write_scalars(tags.eval_scalars({"fid_domain": fid, "intra_fid_per_class_domain": [1.0]}),
                                    step=step)
    writer.close()
    if after_training is not None:
        evaluate.write_scalars(str(logdir), {"fid_domain": after_training}, step=len(fids))


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """Two runs of a learning-rate sweep under one parent directory."""
    parent = tmp_path_factory.mktemp("sweep")
    base = registry.resolve(Config(logdir=str(parent / "a")))
    configs = {"a": base, "b": dataclasses.replace(base, logdir=str(parent / "b"), g_lr=1e-3)}
    write_run(parent / "a", configs["a"], [40.0, 30.0], after_training=29.5)
    write_run(parent / "b", configs["b"], [50.0, 45.0, 20.0])
    return parent, configs


def test_the_event_files_hold_the_experiment_and_the_session(sweep):
    parent, configs = sweep
    record = hparams.read_hparams(str(parent / "a"))
    assert record.columns == tuple(spec.name for spec in hparam_specs())
    assert ("", "eval/fid_domain") in record.metrics and ("eval", "eval/fid_domain") in record.metrics
    assert ("", "eval/modes") in record.metrics and ("", "perf/images_per_second") in record.metrics
    assert ("", "eval/intra_fid_per_class_domain") not in record.metrics  # lists are no scalars
    expected = {name: float(value) if isinstance(value, int) and not isinstance(value, bool)
                else value for name, value in hparam_values(configs["a"]).items()}
    assert record.values == expected
    assert record.values["setup"] == "dcgan" and record.values["g_lr"] == pytest.approx(8e-4)
    assert record.values["d_spectral_norm"] is False and "resolution" not in record.values
    assert hparams.read_hparams(str(parent / "b")).values["g_lr"] == pytest.approx(1e-3)
    [(step, fid)] = summaries.read_scalars(str(parent / "a" / "eval"), "eval/fid_domain")
    assert (step, fid) == (2, 29.5)


def test_tensorboard_serves_both_runs_with_their_hparams_and_metrics(sweep):
    parent, _ = sweep
    with tensorboard(parent) as url:
        plugin = f"{url}/data/plugin/hparams"
        deadline = time.monotonic() + 60
        while True:
            experiment = get_json(f"{plugin}/experiment", {"experimentName": ""})
            groups = get_json(f"{plugin}/session_groups", {
                "experimentName": "", "allowedStatuses": STATUSES, "startIndex": 0,
                "sliceSize": 100, "colParams": [
                    {"hparam": "g_lr", "order": "ORDER_ASC", "includeInResult": True},
                    {"hparam": "setup", "includeInResult": True},
                    {"metric": {"tag": "eval/fid_domain", "group": ""}, "includeInResult": True}]})
            if len(groups.get("sessionGroups", [])) == 2 or time.monotonic() > deadline:
                break
            time.sleep(1)
    columns = {info["name"]: info for info in experiment["hparamInfos"]}
    assert set(columns) == {spec.name for spec in hparam_specs()}
    assert columns["g_lr"]["type"] == "DATA_TYPE_FLOAT64"
    assert columns["loss"]["domainDiscrete"] == sorted(["minimax", "non_saturating", "wasserstein",
                                                        "hinge", "least_squares", "relativistic"])
    assert columns["use_ema"]["domainDiscrete"] == [False, True]
    metrics = {(info["name"].get("group", ""), info["name"]["tag"]) for info in experiment["metricInfos"]}
    assert {("", "eval/fid_domain"), ("eval", "eval/fid_domain"), ("", "eval/high_quality")} <= metrics
    rows = [(group["hparams"]["g_lr"], group["hparams"]["setup"],
             [session["name"] for session in group["sessions"]],
             {(value["name"].get("group", ""), value["name"]["tag"]): (value["trainingStep"], value["value"])
              for value in group["metricValues"]})
            for group in groups["sessionGroups"]]
    assert [row[:3] for row in rows] == [(pytest.approx(8e-4), "dcgan", ["a"]),
                                         (pytest.approx(1e-3), "dcgan", ["b"])]
    # Each metric is its run's last value: training's last evaluation, and --mode=eval's.
    assert rows[0][3][("", "eval/fid_domain")] == (2, 30.0) and rows[0][3][("eval", "eval/fid_domain")] == (2, 29.5)
    assert rows[1][3][("", "eval/fid_domain")] == (3, 20.0) and ("eval", "eval/fid_domain") not in rows[1][3]


def test_eval_scalars_flatten_nested_results_and_keep_numbers_only():
    import numpy as np
    assert tags.eval_scalars({"ab": {"fid": 3, "num_samples": 10}, "modes": np.int64(7),
                              "per_class": [1.0], "name": "x", "flag": True}) == {
        "eval/ab/fid": 3.0, "eval/ab/num_samples": 10.0, "eval/modes": 7.0}


def test_every_metric_a_setup_reports_is_a_column():
    """The evaluations' keys (gan.evaluation) are declared, nested CycleGAN ones per direction."""
    names = registry.metric_names()
    assert names[:4] == ("fid", "kid", "precision", "recall")
    assert [(column.group, column.tag) for column in train.comparison_metrics("domain")[:3]] == [
        ("", "eval/fid_domain"), ("eval", "eval/fid_domain"), ("", "eval/kid_domain")]
    inception = {column.tag for column in train.comparison_metrics("inception")}
    assert {"eval/fid_inception", "eval/ab/fid_inception", "eval/intra_fid_inception",
            "eval/modes", "eval/high_quality"} <= inception
    # Stacked Fashion-MNIST's modes are counted on the domain classifier whatever --evaluator says.
    assert "eval/fid_domain" not in inception and "eval/modes_domain" in inception
    assert {"modes", "high_quality", "intra_fid", "class_accuracy", "ab/fid", "ba/recall"} <= set(names)
    assert len(names) == len(set(names))


def test_reading_a_run_without_hparams_names_what_is_missing(tmp_path):
    writer = tf.summary.create_file_writer(str(tmp_path))
    with writer.as_default():
        tf.summary.scalar("generator/loss", 1.0, step=1)
    writer.close()
    with pytest.raises(ValueError, match="no HParams"):
        hparams.read_hparams(str(tmp_path))
    assert os.listdir(tmp_path)


def test_metric_keys_name_their_features_and_can_be_read_back():
    assert tags.features_name("domain") == "domain"
    assert tags.features_name("inception") == "inception"
    assert tags.features_name("keras_inception_v3") == "keras_inception_v3"
    assert tags.features_name("/models/mine.keras") == "custom"
    assert tags.name_features({"fid": 1.0, "kid_std": 2.0}, "inception") == {
        "fid_inception": 1.0, "kid_std_inception": 2.0}
    assert tags.split_features("kid_std_keras_inception_v3") == ("kid_std", "keras_inception_v3")
    assert tags.split_features("inception_score_inception") == ("inception_score", "inception")
    assert tags.split_features("modes") == ("modes", None)
