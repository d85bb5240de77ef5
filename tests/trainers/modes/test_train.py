"""A real training run in-process: NaN injection with rollback, one trace per function, the
pipeline's batch budget, the resume checks against an older config.json, what
--precision=auto resolves to, a batch larger than the data, and a failed start."""

import dataclasses
import io
import json
import os
import re
import shutil

import keras
import numpy as np
import pytest
import tensorflow as tf

from datasets import pipeline
from datasets import registry as datasets
from tests.image_folders import write_folder
from trainers.config.flags import Config, ConfigError
from trainers.engine import hardware
from trainers.engine.controller import Controller, NanPolicy, PeriodicAction
from trainers.modes import train
from trainers.outputs import summaries
from trainers.setups import building, registry


def tiny_run_config(tmp_path, **overrides) -> Config:
    base = Config(batch_size=16, g_width=4, d_width=4, latent_dim=8, cycles_per_loop=2,
                  precision="float32",  # on every CPU (auto: bfloat16 where native)
                  shuffle_buffer=64, logdir=str(tmp_path / "run"), image_every=2,
                  histogram_every=0, checkpoint_every=2)
    return registry.resolve(dataclasses.replace(base, **overrides))


def test_injected_nan_rolls_back_to_the_last_good_checkpoint(tmp_path):
    config = tiny_run_config(tmp_path, setup="wgan_gp", d_updates=1, penalty_every=1, train_cycles=8, checkpoint_every=4,
                             nan_policy="rollback", nan_lr_factor=0.5)
    run = train.build(config)
    penalty = run.state.loss_weights["penalty"]
    penalty.assign(float("nan"))
    assert not run.state.is_finite()  # a NaN loss weight would block checkpointing too
    penalty.assign(10.0)
    injected = []

    def inject(report):
        if report.step == 6 and not injected:
            penalty.assign(float("nan"))
            injected.append(report.step)

    controller = Controller(trainer=run.trainer, train_cycles=8, cycles_per_loop=2,
                            checkpoint_manager=run.manager, checkpoint_every=4,
                            actions=[PeriodicAction("inject", 0, inject)],
                            nan_policy=NanPolicy(rollback=True, learning_rate_factor=0.5))
    controller.run()
    assert controller.rollbacks == [(8, 4)]
    assert int(run.state.step.numpy()) == 8
    assert float(penalty.numpy()) == 10.0  # restored from the checkpoint
    for path in run.manager.checkpoints:
        for name, _ in tf.train.list_variables(path):
            value = tf.train.load_variable(path, name)
            if np.issubdtype(np.asarray(value).dtype, np.floating):
                assert np.all(np.isfinite(value)), (path, name)
    final = run.manager.latest_checkpoint
    assert final.endswith("ckpt-8")
    assert tf.train.load_variable(final, "learning_rate_scales/discriminator/.ATTRIBUTES/VARIABLE_VALUE") == 0.5


def test_one_trace_per_compiled_function_over_a_run(tmp_path):
    # Loops of 3, 3 and 3 cycles around image steps, a batch of 14 that does not divide the
    # 60,000 examples (batches straddle epochs): shapes stay static, nothing retraces.
    config = tiny_run_config(tmp_path, batch_size=14, train_cycles=9, cycles_per_loop=4, image_every=3)
    controller = train.train(config)
    assert int(controller.trainer.state.step.numpy()) == 9
    assert controller.trainer.traces == 1
    samples = next(a for a in controller.actions if a.name == "samples")
    assert samples.fn.traces == 1


def test_the_pipeline_is_told_how_many_batches_the_rest_of_the_run_draws(tmp_path, monkeypatch):
    # d_updates=2: each cycle draws two real batches (the generator's updates draw none), so a
    # 10-cycle run resumed after 4 global batches draws 16 more; a short run is not worth
    # decoding the whole dataset for (pipeline.hold_in_memory).
    config = tiny_run_config(tmp_path, dataset="ring8", d_updates=2, train_cycles=10)
    run = train.build(config)
    needed = []
    make_input_fn = pipeline.training_input_fn
    monkeypatch.setattr(pipeline, "training_input_fn", lambda *args, **kwargs: (
        needed.append(kwargs["global_batches_needed"]), make_input_fn(*args, **kwargs))[1])
    examples = run.setup.training_examples(config)

    train.make_dataset_fn(config, run.strategy, run.built.phases, examples)(4)
    train.make_dataset_fn(config, run.strategy, run.built.phases, examples)(24)

    assert needed == [16, 0]


@pytest.mark.parametrize("flag, changed, message", [
    ("g_upsample", "nearest", r"--g_upsample='nearest' \(was 'transposed'\)"),
    ("channels", 3, r"--channels=3 \(was None\)"),  # None: the files' own channels
    ("arch", "resnet", r"--arch='resnet' \(was 'dcgan'\)"),  # runs before --arch were DCGANs
])
def test_a_run_recorded_before_a_fixed_flag_existed_resumes_with_its_default(
        tmp_path, flag, changed, message):
    config = tiny_run_config(tmp_path)
    train.write_config_once(config)
    path = tmp_path / "run" / "config.json"
    recorded = json.loads(path.read_text())
    del recorded[flag]  # a config.json written before the flag existed
    path.write_text(json.dumps(recorded))
    train.check_resumable(config)  # the old run did what the default does
    with pytest.raises(ConfigError, match=message):
        train.check_resumable(dataclasses.replace(config, **{flag: changed}))


def test_a_preset_field_missing_from_an_older_record_resumes_with_its_neutral_value(tmp_path):
    config = tiny_run_config(tmp_path)
    train.write_config_once(config)
    path = tmp_path / "run" / "config.json"
    recorded = json.loads(path.read_text())
    del recorded["g_updates"]  # a config.json written before --g_updates existed: one G step
    path.write_text(json.dumps(recorded))
    train.check_resumable(config)
    with pytest.raises(ConfigError, match=r"--g_updates=2 \(was 1\)"):
        train.check_resumable(dataclasses.replace(config, g_updates=2))


def test_a_resnet_run_at_128_px_trains_every_model_in_one_cycle(tmp_path):
    config = tiny_run_config(tmp_path, setup="sngan", arch="resnet", resolution=128, batch_size=4,
                             g_width=2, d_width=2, train_cycles=1, cycles_per_loop=1, image_every=0,
                             checkpoint_every=0)
    setup = registry.get(config.setup)
    tf.keras.utils.set_random_seed(config.seed)  # as train.build seeds the initial weights
    initial = {name: [v.numpy() for v in model.trainable_variables] for name, model in
               building.build_run(setup, config, setup.dataset_info(config),
                                  tf.distribute.get_strategy()).models.items()}
    progress = io.StringIO()
    controller = train.train(config, progress_stream=progress)
    models = controller.trainer.state.models
    assert models["generator"].output_shape == (None, 128, 128, 1)
    assert int(controller.trainer.state.step.numpy()) == 1
    assert set(models) == set(initial) == {"generator", "discriminator"}
    for name, model in models.items():
        assert any(not np.array_equal(before, after.numpy())
                   for before, after in zip(initial[name], model.trainable_variables)), name
    losses = re.search(r"step 1/1 d_loss=(\S+) g_loss=(\S+)", progress.getvalue()).groups()
    assert all(np.isfinite(float(loss)) for loss in losses), progress.getvalue()
    # --image_every=0 and --histogram_every=0: neither was written (they once ran every loop).
    tags = summaries.read_event_tags(config.logdir)
    assert tags["scalars"] and not tags["images"] and not tags["histograms"]


def test_a_resume_may_change_lr_factors_but_not_the_patterns_or_which_freeze(tmp_path):
    config = tiny_run_config(tmp_path, lr_multipliers="generator/seed=0,discriminator/down0=2")
    train.write_config_once(config)
    train.check_resumable(dataclasses.replace(config, lr_multipliers="generator/seed=0,discriminator/down0=0.5"))
    for changed in ("generator/seed=0,discriminator/down0=0", "generator/seed=0", ""):
        with pytest.raises(ConfigError, match=re.escape(
                f"--lr_multipliers={changed!r} has other patterns, or freezes other ones, than the "
                f"run in {config.logdir} (was 'generator/seed=0,discriminator/down0=2')")):
            train.check_resumable(dataclasses.replace(config, lr_multipliers=changed))


USER_GENERATOR = "tests.trainers.setups.user_models:make_generator"


@pytest.mark.parametrize("native, chosen", [(True, "mixed_bfloat16"), (False, "float32")])
def test_auto_precision_of_a_new_run_is_the_hardwares_and_float32_with_a_user_network(
        tmp_path, monkeypatch, capsys, native, chosen):
    monkeypatch.setattr(hardware, "detect", lambda: native)
    fresh = tiny_run_config(tmp_path, precision="auto")
    assert train.resolve_precision(fresh).precision == chosen
    assert f"--precision=auto: {chosen} (the hardware " in capsys.readouterr().err
    user = dataclasses.replace(fresh, generator=USER_GENERATOR)
    assert train.resolve_precision(user).precision == "float32"
    assert capsys.readouterr().err == (
        "--precision=auto: float32 (a user network keeps its own dtype policy).\n")
    assert train.resolve_precision(dataclasses.replace(fresh, precision="float32")).precision == (
        "float32")


def test_auto_precision_on_a_resume_is_the_runs_own_even_where_bfloat16_is_emulated(
        tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(hardware, "detect", lambda: False)
    config = tiny_run_config(tmp_path, precision="auto")
    train.write_config_once(dataclasses.replace(config, precision="mixed_bfloat16"))
    assert train.resolve_precision(config).precision == "mixed_bfloat16"
    printed = capsys.readouterr().err
    assert printed.startswith("--precision=auto: mixed_bfloat16 (the run's own, from config.json). "
                              "Warning: --precision=mixed_bfloat16 without native bfloat16")
    # A record from before --precision existed: those runs trained in float32.
    path = tmp_path / "run" / "config.json"
    recorded = json.loads(path.read_text())
    del recorded["precision"]
    path.write_text(json.dumps(recorded))
    monkeypatch.setattr(hardware, "detect", lambda: True)
    resumed = train.resolve_precision(config)
    assert resumed.precision == "float32"
    train.check_resumable(resumed)  # the old run did what float32 does


@pytest.mark.parametrize("native, policy", [(True, "mixed_bfloat16"), (False, "float32")])
def test_a_build_outside_the_train_mode_resolves_auto_the_same_way(monkeypatch, native, policy):
    monkeypatch.setattr(hardware, "detect", lambda: native)
    with building.dtype_policy(Config(precision="auto")):
        assert keras.mixed_precision.global_policy().name == policy
    with building.dtype_policy(Config(precision="auto", generator=USER_GENERATOR)):
        assert keras.mixed_precision.global_policy().name == "float32"
    assert keras.mixed_precision.global_policy().name == "float32"
    assert Config().precision == "auto"


def test_a_batch_larger_than_a_replicas_share_of_the_data_is_refused_before_any_file(tmp_path):
    folder = write_folder(str(tmp_path / "three"), 3, side=28, channels=1)
    config = tiny_run_config(tmp_path, dataset=f"folder:{folder}", batch_size=4, cpu_replicas=2,
                             train_cycles=2)
    with pytest.raises(ConfigError, match=re.escape(
            f"--batch_size=4 is larger than the training set: --dataset=folder:{folder} has 3 "
            "examples, and a larger batch would hold some twice; use --batch_size=2 or less.")):
        train.train(config)
    assert not (tmp_path / "run").exists()


def unsaveable_discriminator(shape, **arguments) -> keras.Model:
    """--discriminator: a model whose layer Keras saves but cannot rebuild (it is local to this
    function, so no name finds its class)."""

    class Unregistered(keras.layers.Layer):
        def call(self, inputs):
            return 2.0 * inputs

    examples = keras.Input(shape)
    return keras.Model(examples, keras.layers.Dense(1)(Unregistered()(examples)))


@pytest.mark.parametrize("there_before", [[], ["notes.txt"]])
def test_a_start_that_fails_once_it_holds_the_run_directory_leaves_it_as_it_was(tmp_path,
                                                                               there_before):
    logdir = tmp_path / "run"
    for name in there_before:
        logdir.mkdir(exist_ok=True)
        (logdir / name).write_text("the user's")
    discriminator = f"{__name__}:unsaveable_discriminator"
    config = tiny_run_config(tmp_path, dataset="ring8", g_width=Config.g_width,
                             d_width=Config.d_width, generator=USER_GENERATOR,
                             discriminator=discriminator, train_cycles=2)
    # LOGDIR/networks/generator.keras is saved first; then the discriminator is refused.
    with pytest.raises(ConfigError, match=re.escape(f"--discriminator={discriminator!r}: its "
                                                    "model cannot be saved and rebuilt")):
        train.train(config)
    if there_before:
        assert sorted(os.listdir(logdir)) == there_before
        assert (logdir / "notes.txt").read_text() == "the user's"
    else:
        assert not logdir.exists()


def test_a_toy_run_whose_record_says_points_resumes_on_the_same_toy(tmp_path):
    """Commit 6f83e9c recorded a toy's kind as "points"; the resume check reads it as a toy."""
    old = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "old_records",
                       "ring8_dataset.json")
    shutil.copy(old, tmp_path / "dataset.json")
    train.check_data_unchanged(Config(logdir=str(tmp_path)), datasets.dataset_info("ring8"))
    record = json.loads((tmp_path / "dataset.json").read_text())
    (tmp_path / "dataset.json").write_text(json.dumps({**record, "kind": "image"}))
    with pytest.raises(datasets.DatasetError, match=r"kind toy \(was image\)"):
        train.check_data_unchanged(Config(logdir=str(tmp_path)), datasets.dataset_info("ring8"))
