"""--setup=r3gan through run.py as a user runs it: a run killed after a checkpoint and resumed
ends with the weights of the same run trained straight (its schedules read the optimizers' and
the cycle counters, which the checkpoint holds); sampling, evaluation and export of it; and the
refusals of its flags where they do not apply.

The domain evaluator is an untrained classifier written straight into the cache (as in
tests/test_conditional_cli.py): --mode=eval is checked to run and report, not for its values.
"""

import json
import time

import numpy as np
import pytest
import tensorflow as tf

from gan import evaluator
from tests import cli
from tests.checkpoint_files import assert_same_checkpoints
from tests.cli import TINY, run, run_together
from tests.gan.synthetic_evaluator import write_evaluator

CYCLES = 12
COMMON = [*TINY, "--setup=r3gan", "--deterministic", "--checkpoint_every=2", "--cycles_per_loop=1",
          "--image_every=0", "--histogram_every=0", f"--train_cycles={CYCLES}"]


@pytest.fixture(scope="module")
def r3gan_run(tmp_path_factory):
    """(root, logdir of the straight run, logdir of the killed and resumed one)."""
    root = tmp_path_factory.mktemp("r3gan")
    straight = cli.start(*COMMON, f"--logdir={root / 'a'}", log=str(root / "a.log"))
    killed = cli.start(*COMMON, f"--logdir={root / 'b'}", log=str(root / "b.log"))
    deadline = time.monotonic() + 240
    while not (root / "b" / "checkpoints" / "ckpt-4.index").exists():
        assert killed.poll() is None and time.monotonic() < deadline, open(root / "b.log").read()[-2000:]
        time.sleep(0.05)
    killed.kill()  # SIGKILL: no handler, no clean-up
    killed.wait()
    killed_at = tf.train.latest_checkpoint(str(root / "b" / "checkpoints"))
    assert not killed_at.endswith(f"ckpt-{CYCLES}"), killed_at
    resumed = run(*COMMON, f"--logdir={root / 'b'}")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    straight.wait(timeout=300)
    assert straight.returncode == 0, open(root / "a.log").read()[-3000:]
    return root, root / "a", root / "b"


def test_a_killed_and_resumed_r3gan_run_ends_with_the_weights_of_the_straight_run(r3gan_run):
    _, straight, resumed = r3gan_run
    recorded = json.loads((resumed / "config.json").read_text())
    assert (recorded["loss"], recorded["penalty"], recorded["beta1"], recorded["beta2_final"],
            recorded["ema_halflife_schedule"]) == ("relativistic", "r1_r2", 0.0, 0.99, "cosine")
    assert_same_checkpoints(str(straight / "checkpoints" / f"ckpt-{CYCLES}"),
                            str(resumed / "checkpoints" / f"ckpt-{CYCLES}"))


def test_an_r3gan_run_samples_evaluates_and_exports(r3gan_run):
    root, logdir, _ = r3gan_run
    cache = root / "evaluators"
    write_evaluator(evaluator.build_classifier(input_shape=(28, 28, 1), num_classes=10, width=4,
                                               feature_dim=16), str(cache))
    sample, evaluation, export = run_together(
        ["--mode=sample", f"--logdir={logdir}", "--num_samples=6", "--seed=5",
         f"--output={root / 'samples.npy'}"],
        ["--mode=eval", f"--logdir={logdir}", "--eval_samples=100", f"--evaluator_dir={cache}"],
        ["--mode=export", f"--logdir={logdir}", f"--export_dir={root / 'export'}"])
    assert sample.returncode == 0, sample.stderr[-2000:]
    samples = np.load(root / "samples.npy")
    assert samples.shape == (6, 28, 28, 1) and samples.dtype == np.uint8
    assert evaluation.returncode == 0, evaluation.stderr[-2000:]
    metrics = json.loads(evaluation.stdout.strip().splitlines()[-1])
    assert metrics["step"] == CYCLES and metrics["num_samples"] == 100
    assert metrics["fid_domain"] > 0 and metrics["features"]["name"] == "domain"
    assert export.returncode == 0, export.stderr[-2000:]
    loaded = tf.saved_model.load(str(root / "export" / "generator" / str(CYCLES)))
    served = loaded.signatures["seed"](seed=tf.constant(5, tf.int64), count=tf.constant(6))
    # --use_ema: sample and export both draw from the EMA generator
    assert np.abs(next(iter(served.values())).numpy().astype(int) - samples.astype(int)).max() <= 1


@pytest.mark.parametrize("flags, named", [
    (["--optimizer=rmsprop"], "--beta2_final=0.99 is invalid"),
    (["--dp_l2_clip=1", "--dp_noise_multiplier=1", "--penalty=r2"], "--loss='relativistic' is invalid"),
    (["--ema_halflife_kimg=0"], "--ema_halflife_schedule='cosine' is invalid"),
    (["--penalty_final_factor=-1"], "--penalty_final_factor=-1.0 is invalid"),
])
def test_r3gans_flags_are_refused_where_they_do_not_apply(flags, named, tmp_path):
    result = run(*TINY, "--setup=r3gan", f"--logdir={tmp_path / 'run'}", *flags)
    assert result.returncode == 2, result.stdout[-1000:] + result.stderr[-1000:]
    assert named in result.stderr
    assert not (tmp_path / "run").exists()


def test_cyclegan_refuses_the_penalty_schedule_it_does_not_read(tmp_path):
    result = run("--setup=cyclegan", f"--logdir={tmp_path / 'run'}", "--penalty_final_factor=0.1")
    assert result.returncode == 2
    assert "--penalty_final_factor=0.1 is invalid: only --setup=" in result.stderr
