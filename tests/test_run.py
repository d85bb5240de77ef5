"""`run.py` end to end, as a user runs it: flag errors, a short Fashion-MNIST run, sampling,
resuming, and TensorBoard reading the run."""

import json
import os
import re
import signal
import subprocess
import time
import urllib.parse

import numpy as np
import pytest
import tensorflow as tf

from tests import cli
from tests.checkpoint_files import assert_same_checkpoints
from tests.image_folders import write_folder
from tests.cli import (ENV, ROOT, RUN_PY, TINY, TINY_TRANSLATION, get_json, run, run_together,
                       tensorboard)
from trainers.engine import hardware
from trainers.outputs import hparams, summaries


@pytest.fixture
def start():
    """``start(*flags, log=PATH)``: `run.py` in the background, its output in the file `log`, so
    independent runs overlap; a run still going when the test ends is killed."""
    processes = []

    def start_run(*flags, log):
        processes.append(cli.start(*flags, log=str(log)))
        return processes[-1]

    yield start_run
    for process in processes:
        if process.poll() is None:
            process.kill()
            process.wait()


def finish(process, log, timeout=300):
    """Waits for a `start`ed run and checks that it succeeded."""
    process.wait(timeout=timeout)
    assert process.returncode == 0, open(log).read()[-2000:]


@pytest.mark.parametrize("flags, expected", [
    (["--d_updates=0"], "--d_updates=0"),
    (["--g_lr=-0.001"], "--g_lr=-0.001"),
    (["--d_lr=-1"], "--d_lr=-1.0"),
    (["--batch_size=63", "--cpu_replicas=2"], "--batch_size=63"),
    (["--setup=stylegan9"], "--setup='stylegan9'"),
    (["--dataset=imagenet_fake"], "imagenet_fake"),
    (["--resolution=48"], "--resolution=48"),
    (["--strategy=tpu"], "--strategy='tpu'"),
    (["--output=samples.jpg", "--mode=sample"], "--output='samples.jpg'"),
    (["--precision=float64"], "--precision='float64'"),
    (["--nan_policy=ignore"], "--nan_policy='ignore'"),
    (["--ema_halflife_kimg=-1"], "--ema_halflife_kimg=-1.0"),
    (["--g_lr_schedule=step"], "--g_lr_schedule='step'"),
    (["--setup=wgan_gp", "--g_lr_schedule=inverse_sqrt"], "--lr_hold_cycles=0"),
    (["--d_clip_global_norm=-1"], "--d_clip_global_norm=-1.0"),
    (["--nan_lr_factor=0"], "--nan_lr_factor=0.0"),
    (["--diffaugment=rotate"], "--diffaugment"),
    (["--penalty_every=0"], "--penalty_every=0"),
    (["--setup=sngan", "--d_normalization=batch"], "--d_normalization='batch'"),
    (["--pack=3"], "--pack=3"),
    (["--setup=cgan", "--pack=2"], "--pack=2"),
])
def test_invalid_flags_exit_nonzero_naming_the_flag(flags, expected, tmp_path):
    result = run(*flags, f"--logdir={tmp_path / 'run'}", timeout=120)
    assert result.returncode == 2, result.stderr[-2000:]
    assert expected in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_missing_data_is_reported_before_the_run_directory_is_touched(tmp_path):
    result = run(f"--logdir={tmp_path / 'run'}", f"--fashion_mnist_dir={tmp_path / 'none'}",
                 f"--data_dir={tmp_path / 'tfds'}")
    assert result.returncode == 2, result.stderr[-2000:]
    assert "apt-get install dataset-fashion-mnist" in result.stderr
    assert "--fashion_mnist_dir" in result.stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("images, flags, refusal", [
    (5, ["--batch_size=8"], "has 5 examples, and a larger batch would hold some twice; use "
                            "--batch_size=5 or less."),
    (1, ["--batch_size=2", "--cpu_replicas=2"],
     "has 1 example, and a larger batch would hold some twice; no batch fits, as each of the 2 "
     "replicas needs one example of its own: train on fewer replicas (--cpu_replicas, workers) "
     "or on more data."),
])
def test_a_batch_larger_than_the_training_set_exits_2_before_the_run_directory_is_made(
        tmp_path, images, flags, refusal):
    folder = write_folder(str(tmp_path / "images"), images, side=28, channels=1)
    result = run("--g_width=8", "--d_width=8", "--latent_dim=16", "--precision=float32",
                 "--train_cycles=2", f"--dataset=folder:{folder}", *flags,
                 f"--logdir={tmp_path / 'run'}")
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr.strip().splitlines()[-1] == (
        f"error: {flags[0]} is larger than the training set: --dataset=folder:{folder} {refusal}")
    assert not (tmp_path / "run").exists()


def test_the_issues_batch_of_a_hundred_million_is_refused_at_once(tmp_path):
    result = run("--batch_size=100000000", f"--logdir={tmp_path / 'run'}", timeout=120)
    assert result.returncode == 2, result.stderr[-2000:]
    assert ("--batch_size=100000000 is larger than the training set: --dataset=fashion_mnist has "
            "60000 examples") in result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "run").exists()


def test_flagfile_is_read(tmp_path):
    flagfile = tmp_path / "flags.txt"
    flagfile.write_text("--setup=wgan\n--d_updates=0\n")
    result = run(f"--flagfile={flagfile}", f"--logdir={tmp_path / 'run'}")
    assert result.returncode == 2
    assert "--d_updates=0" in result.stderr


def test_sample_without_a_run_names_the_logdir(tmp_path):
    result = run("--mode=sample", f"--logdir={tmp_path}", f"--output={tmp_path / 's.png'}")
    assert result.returncode == 2
    assert "--logdir" in result.stderr and "no training run" in result.stderr


@pytest.fixture(scope="module")
def short_run(tmp_path_factory):
    logdir = tmp_path_factory.mktemp("fashion") / "run"
    flags = [*TINY, f"--logdir={logdir}", "--train_cycles=4", "--image_every=2",
             "--histogram_every=4", "--checkpoint_every=2", "--keep_checkpoints=5"]
    result = run(*flags)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return logdir, flags, result


def test_short_run_writes_summaries_and_checkpoints(short_run):
    logdir, _, result = short_run
    assert "step 4/4" in result.stdout
    tags = summaries.read_event_tags(str(logdir))
    assert "samples" in tags["images"]
    assert {"discriminator/loss", "generator/loss", "discriminator/real_score",
            "discriminator/fake_score", "discriminator/grad_norm", "generator/learning_rate",
            "perf/images_per_second"} <= tags["scalars"]
    assert any(tag.startswith("gradients/discriminator/") for tag in tags["histograms"])
    assert any(tag.startswith("weights/") for tag in tags["histograms"])
    assert "config" in tags["text"]
    steps = [step for step, _ in summaries.read_scalars(str(logdir), "generator/loss")]
    assert steps == [2, 4]
    manager_state = tf.train.get_checkpoint_state(str(logdir / "checkpoints"))
    assert [os.path.basename(p) for p in manager_state.all_model_checkpoint_paths] == ["ckpt-2", "ckpt-4"]
    assert json.loads((logdir / "config.json").read_text())["train_cycles"] == 4


def test_checkpoint_restores_every_piece_of_state(short_run):
    logdir, _, _ = short_run
    names = [name for name, _ in tf.train.list_variables(str(logdir / "checkpoints" / "ckpt-4"))]
    assert "step/.ATTRIBUTES/VARIABLE_VALUE" in names
    assert any(name.startswith("optimizers/discriminator/") for name in names)
    assert any(name.startswith("models/generator/") for name in names)
    assert tf.train.load_variable(str(logdir / "checkpoints" / "ckpt-4"), "step/.ATTRIBUTES/VARIABLE_VALUE") == 4


def test_rerunning_a_finished_run_does_not_retrain(short_run):
    logdir, flags, _ = short_run
    result = run(*flags)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "already finished at step 4" in result.stdout
    assert tf.train.latest_checkpoint(str(logdir / "checkpoints")).endswith("ckpt-4")


def test_sample_mode_writes_npy_and_png(short_run, tmp_path):
    logdir, _, _ = short_run
    sample = ["--mode=sample", f"--logdir={logdir}"]
    first, again, grid = run_together([*sample, "--num_samples=5", f"--output={tmp_path / 'a.npy'}"],
                                      [*sample, "--num_samples=5", f"--output={tmp_path / 'b.npy'}"],
                                      [*sample, "--num_samples=6", f"--output={tmp_path / 'g.png'}"])
    assert first.returncode == 0, first.stderr[-2000:]
    samples = np.load(tmp_path / "a.npy")
    assert samples.shape == (5, 28, 28, 1) and samples.dtype == np.uint8
    assert samples.std() > 0
    assert again.returncode == 0, again.stderr[-2000:]
    np.testing.assert_array_equal(samples, np.load(tmp_path / "b.npy"))
    assert grid.returncode == 0, grid.stderr[-2000:]
    import matplotlib.image
    assert matplotlib.image.imread(tmp_path / "g.png").shape[:2] == (2 * 28 + 3, 3 * 28 + 4)


def test_a_finished_run_leaves_its_samples_and_says_where_everything_is(short_run, tmp_path):
    """LOGDIR/samples.png is what --mode=sample draws from the last checkpoint, and the run's
    last lines name the directory, that file, TensorBoard and the next commands."""
    logdir, _, result = short_run
    sampled = run("--mode=sample", f"--logdir={logdir}", f"--output={tmp_path / 'sampled.png'}")
    assert sampled.returncode == 0, sampled.stderr[-2000:]
    assert (logdir / "samples.png").read_bytes() == (tmp_path / "sampled.png").read_bytes()
    tail = result.stdout.splitlines()[-6:]
    assert tail == [f"Run directory: {logdir}", f"Samples:       {logdir / 'samples.png'}",
                    f"TensorBoard:   tensorboard --logdir {logdir}",
                    f"Next:          python run.py --mode=sample --logdir={logdir} --output=more.png",
                    f"               python run.py --mode=eval --logdir={logdir}",
                    f"               python run.py --mode=export --logdir={logdir}"]


def test_changed_fixed_flag_on_resume_is_rejected(short_run):
    logdir, flags, _ = short_run
    result = run(*flags, "--d_updates=3", "--train_cycles=6")
    assert result.returncode == 2
    assert "--d_updates=3" in result.stderr and "new --logdir" in result.stderr


def test_a_resumed_run_keeps_its_recorded_preset_values(tmp_path):
    """A run started under an older preset (here G at 1e-3) resumes with that rate, not today's."""
    from trainers.config.flags import Config
    from trainers.setups import registry

    logdir = tmp_path / "run"
    logdir.mkdir()
    flags = [*TINY, f"--logdir={logdir}", "--train_cycles=2", "--image_every=0",
             "--histogram_every=0", "--checkpoint_every=2"]
    started = registry.resolve(Config(batch_size=16, g_width=8, d_width=8, latent_dim=16,
                                      cycles_per_loop=2, shuffle_buffer=256, logdir=str(logdir),
                                      train_cycles=2, image_every=0, histogram_every=0,
                                      checkpoint_every=2, precision="float32"))
    assert started.g_lr != 1e-3
    (logdir / "config.json").write_text(json.dumps({**started.as_dict(), "g_lr": 1e-3}))
    result = run(*flags)
    assert result.returncode == 0, result.stderr[-2000:]
    [(step, rate)] = summaries.read_scalars(str(logdir), "generator/learning_rate")
    assert step == 2 and rate == pytest.approx(1e-3)


def test_interrupted_run_resumes_to_the_same_weights(tmp_path, start):
    common = [*TINY, "--deterministic", "--d_updates=2", "--checkpoint_every=3", "--image_every=0",
              "--histogram_every=0"]
    straight = start(*common, f"--logdir={tmp_path / 'a'}", "--train_cycles=6", log=tmp_path / "a.log")
    first = run(*common, f"--logdir={tmp_path / 'b'}", "--train_cycles=3")
    assert first.returncode == 0, first.stderr[-2000:]
    second = run(*common, f"--logdir={tmp_path / 'b'}", "--train_cycles=6")
    assert second.returncode == 0, second.stderr[-2000:]
    finish(straight, tmp_path / "a.log")
    assert_same_checkpoints(*(str(tmp_path / d / "checkpoints" / "ckpt-6") for d in ("a", "b")))
    # One HParams session, written when the run started (config.json's values), not per process.
    starts = [value for _, value in summaries.summary_values(str(tmp_path / "b"))
              if value.metadata.plugin_data.plugin_name == "hparams"]
    assert sorted(value.tag for value in starts) == ["_hparams_/experiment", "_hparams_/session_start_info"]
    assert hparams.read_hparams(str(tmp_path / "b")).values["train_cycles"] == 3.0


def test_kill_9_at_a_random_moment_then_resume_gives_bit_identical_weights(tmp_path, start):
    common = [*TINY, "--deterministic", "--d_updates=2", "--checkpoint_every=2", "--cycles_per_loop=1",
              "--image_every=3", "--histogram_every=0", "--ema_halflife_kimg=0.1", "--train_cycles=60"]
    straight = start(*common, f"--logdir={tmp_path / 'a'}", log=tmp_path / "a.log")
    logdir = tmp_path / "b"
    process = start(*common, f"--logdir={logdir}", log=tmp_path / "b.log")
    deadline = time.monotonic() + 120
    while not (logdir / "checkpoints" / "ckpt-4.index").exists():
        assert process.poll() is None and time.monotonic() < deadline, "no checkpoint before the kill"
        time.sleep(0.05)
    time.sleep(float(np.random.default_rng().uniform(0.0, 0.3)))
    process.kill()  # SIGKILL: no handler, no clean-up
    process.wait()
    killed_at = tf.train.latest_checkpoint(str(logdir / "checkpoints"))
    assert killed_at is not None and not killed_at.endswith("ckpt-60"), killed_at
    resumed = run(*common, f"--logdir={logdir}")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    finish(straight, tmp_path / "a.log")
    assert_same_checkpoints(str(tmp_path / "a" / "checkpoints" / "ckpt-60"), str(logdir / "checkpoints" / "ckpt-60"))


def test_tensorboard_serves_the_run(short_run):
    logdir, _, _ = short_run
    with tensorboard(logdir) as url:
        deadline = time.monotonic() + 90
        scalars = images = {}
        while time.monotonic() < deadline:
            scalars = get_json(f"{url}/data/plugin/scalars/tags")
            images = get_json(f"{url}/data/plugin/images/tags")
            if scalars and images:
                break
            time.sleep(1)
        run_tags = next(iter(scalars.values()), {})
        assert "generator/loss" in run_tags, scalars
        assert any("samples" in tags for tags in images.values()), images
        run_name = next(iter(scalars))
        series = get_json(f"{url}/data/plugin/scalars/scalars?"
                          + urllib.parse.urlencode({"run": run_name, "tag": "generator/loss"}))
        assert [point[1] for point in series] == [2, 4]


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory):
    """A 2-D toy run given only --train_time (no --train_cycles) on --precision=auto, with the
    packed (PacGAN) discriminator and the generator's rate decaying linearly over the time:
    (logdir, result). The toy's endless data: a run with no end known would first hold all of
    Fashion-MNIST in memory."""
    logdir = tmp_path_factory.mktemp("toy") / "ring"
    result = run("--dataset=ring8", "--batch_size=32", "--latent_dim=4", "--pack=2",
                 f"--logdir={logdir}", "--train_time=15s", "--g_lr_schedule=linear",
                 "--precision=auto", "--cycles_per_loop=2",
                 "--image_every=2", "--histogram_every=0", "--checkpoint_every=0")
    assert result.returncode == 0, result.stderr[-2000:]
    return logdir, result


def test_a_timed_runs_decaying_rate_follows_the_share_of_the_time_used(toy_run):
    """Each loop trains at the peak rate times one minus the share of --train_time used when it
    began: the first (which traces: most of the budget on a loaded CPU) at the peak, the last
    (begun in the budget's final second or so) near 0; the discriminator's constant rate stays
    put. (The logged rate is a float32 mean over the loop's updates.)"""
    logdir, _ = toy_run
    peak = json.loads((logdir / "config.json").read_text())["g_lr"]
    rates = [rate for _, rate in summaries.read_scalars(str(logdir), "generator/learning_rate")]
    assert len(rates) >= 2 and rates[0] == pytest.approx(peak, rel=1e-4)
    assert all(later <= earlier for earlier, later in zip(rates, rates[1:]))
    assert rates[-1] < 0.25 * peak
    d_rates = {rate for _, rate in summaries.read_scalars(str(logdir), "discriminator/learning_rate")}
    assert len(d_rates) == 1


def test_toy_run_draws_scatter_plots_and_samples_points(toy_run, tmp_path):
    logdir, _ = toy_run
    tags = summaries.read_event_tags(str(logdir))
    assert "samples" in tags["images"] and "generator/loss" in tags["scalars"]
    result = run("--mode=sample", f"--logdir={logdir}", "--num_samples=7", f"--output={tmp_path / 'p.npy'}")
    assert result.returncode == 0, result.stderr[-2000:]
    points = np.load(tmp_path / "p.npy")
    assert points.shape == (7, 2) and points.dtype == np.float32


def test_mirrored_run_on_two_cpu_replicas(tmp_path):
    logdir = tmp_path / "mirrored"
    result = run(*TINY, "--strategy=mirrored", "--cpu_replicas=2", "--d_updates=2", f"--logdir={logdir}",
                 "--train_cycles=2", "--image_every=2", "--histogram_every=2")
    assert result.returncode == 0, result.stderr[-2000:]
    checkpoint = tf.train.latest_checkpoint(str(logdir / "checkpoints"))
    assert tf.train.load_variable(checkpoint, "step/.ATTRIBUTES/VARIABLE_VALUE") == 2
    iterations = [tf.train.load_variable(checkpoint, name) for name, _ in tf.train.list_variables(checkpoint)
                  if name.startswith("optimizers/discriminator/") and "iteration" in name]
    assert iterations == [4]


def test_sigterm_saves_a_checkpoint_and_exits_with_the_restart_code(tmp_path):
    logdir = tmp_path / "run"
    flags = ["--dataset=ring8", "--batch_size=32", "--latent_dim=4", "--cycles_per_loop=5",
             "--checkpoint_every=100000", "--image_every=0", "--histogram_every=0", f"--logdir={logdir}"]
    process = subprocess.Popen([*RUN_PY, *flags, "--train_cycles=1000000"],
                               cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not list(logdir.glob("events.*")):
            assert process.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
        time.sleep(1)
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 42, err[-2000:]
    saved = int(re.search(r"checkpoint saved at step (\d+)", err).group(1))
    assert tf.train.latest_checkpoint(str(logdir / "checkpoints")).endswith(f"ckpt-{saved}")
    resumed = run(*flags, f"--train_cycles={saved + 5}")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert f"Finished at step {saved + 5}" in resumed.stdout


def test_cyclegan_run_translates_between_two_fashion_mnist_classes(tmp_path):
    logdir = tmp_path / "cyclegan"
    result = run(*TINY_TRANSLATION, "--setup=cyclegan", "--domain_a=fashion_mnist:Sneaker",
                 "--domain_b=fashion_mnist:Ankle boot", f"--logdir={logdir}", "--train_cycles=2",
                 "--image_every=2", "--histogram_every=0")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Finished at step 2" in result.stdout
    assert {"translation_ab", "translation_ba"} <= summaries.read_event_tags(str(logdir))["images"]
    checkpoint = tf.train.latest_checkpoint(str(logdir / "checkpoints"))
    iterations = {name.split("/")[1]: tf.train.load_variable(checkpoint, name)
                  for name, _ in tf.train.list_variables(checkpoint)
                  if name.startswith("optimizers/") and "/_iterations/" in name}
    assert iterations == dict.fromkeys(
        ["discriminator_a", "discriminator_b", "generator_ab", "generator_ba"], 2)


def test_cyclegan_with_an_unknown_class_lists_the_class_names(tmp_path):
    result = run("--setup=cyclegan", "--domain_a=fashion_mnist:Sneakers", "--domain_b=fashion_mnist:Bag",
                 f"--logdir={tmp_path / 'run'}", timeout=120)
    assert result.returncode == 2, result.stderr[-2000:]
    assert "--domain_a='fashion_mnist:Sneakers'" in result.stderr and "'Ankle boot'" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "run").exists()


def test_a_timed_run_on_auto_precision_ends_like_a_finished_one(toy_run):
    """--train_time alone: no cycle limit (not the default 6000); the time ends the run."""
    logdir, result = toy_run
    expected = "mixed_bfloat16" if hardware.detect() else "float32"
    assert f"--precision=auto: {expected} " in result.stderr
    recorded = json.loads((logdir / "config.json").read_text())
    assert recorded["precision"] == expected and recorded["train_cycles"] is None
    step = int(re.search(r"Finished at step (\d+);", result.stdout).group(1))
    assert step > 0 and re.search(rf"^step {step} .* left 0:00$", result.stdout, re.M)
    record = json.loads((logdir / "train_time.json").read_text())
    assert list(record) == [str(step)] and record[str(step)] >= 15.0
    assert (logdir / "checkpoints" / f"ckpt-{step}.index").exists()


def test_a_run_prints_gantrys_lines_only_unless_tensorflow_logs_is_given(tmp_path):
    """As `make run` starts it (a fresh interpreter, --precision=auto, nothing asked of
    TensorFlow's log level; level 0 here: TF_CPP_MIN_LOG_LEVEL does not reach TensorFlow 2.21's
    Abseil lines anyway), a run prints no native log line; --tensorflow_logs brings them back."""
    native = re.compile(r"^([IWEF]\d{4} \d\d:\d\d:|WARNING: All log messages before absl)", re.M)
    small = ["--batch_size=16", "--g_width=8", "--d_width=8", "--latent_dim=16",
             "--cycles_per_loop=2", "--shuffle_buffer=256", "--train_cycles=4", "--image_every=0"]
    quiet, verbose = run_together([*small, f"--logdir={tmp_path / 'quiet'}"],
                                  [*small, f"--logdir={tmp_path / 'verbose'}", "--tensorflow_logs"],
                                  env={"TF_CPP_MIN_LOG_LEVEL": "0"})
    for result in (quiet, verbose):
        assert result.returncode == 0, result.stderr[-3000:]
        assert "Finished at step 4" in result.stdout
    assert not native.findall(quiet.stdout + quiet.stderr), quiet.stderr
    assert native.findall(verbose.stderr)
