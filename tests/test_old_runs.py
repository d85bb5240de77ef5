"""Run directories written before the trainers/ restructuring (commit 3f93e04) still resume
where they stopped and still sample what they sampled then. tests/fixtures/old_runs/README.md
says how they were made."""

import glob
import os
import re
import shutil

import numpy as np
import pytest
import tensorflow as tf

from tests.cli import ROOT, run_together

FIXTURES = os.path.join(ROOT, "tests", "fixtures", "old_runs")
# The flags each run was started with; a resume must repeat the settings it cannot change.
FLAGS = {
    "dcgan": ["--batch_size=8", "--g_width=4", "--d_width=4", "--latent_dim=8", "--shuffle_buffer=256",
              "--ema_halflife_kimg=0.1", "--cycles_per_loop=2", "--checkpoint_every=4",
              "--image_every=0", "--histogram_every=0"],
    "cgan": ["--setup=cgan", "--batch_size=8", "--g_width=4", "--d_width=4", "--latent_dim=8",
             "--shuffle_buffer=256", "--cycles_per_loop=2", "--checkpoint_every=4",
             "--image_every=0", "--histogram_every=0"],
}


SAMPLES = [("dcgan", [], "dcgan.npy"), ("cgan", ["--label=Sneaker"], "cgan_sneaker.npy")]


def copy_of(name, tmp_path):
    """A copy of the fixture run `name`: runs write to their directory."""
    return shutil.copytree(os.path.join(FIXTURES, name), tmp_path / name)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Every run.py process the tests below check, started together, each on its own copy of
    a fixture run: {("resume", name) or ("sample", reference): (its directory, finished run)}."""
    directories, commands = {}, {}
    for name in sorted(FLAGS):
        directory = tmp_path_factory.mktemp(f"resume_{name}")
        logdir = copy_of(name, directory)
        directories["resume", name] = logdir
        commands["resume", name] = [f"--logdir={logdir}", "--train_cycles=8", *FLAGS[name]]
    for name, flags, reference in SAMPLES:
        directory = tmp_path_factory.mktemp(f"sample_{name}")
        directories["sample", reference] = directory
        commands["sample", reference] = ["--mode=sample", f"--logdir={copy_of(name, directory)}",
                                         "--num_samples=6", *flags,
                                         f"--output={directory / 'samples.npy'}"]
    results = run_together(*commands.values())
    return {key: (directories[key], result) for key, result in zip(commands, results)}


def summary_steps(logdir):
    return {event.step for path in glob.glob(os.path.join(logdir, "events.*"))
            for event in tf.compat.v1.train.summary_iterator(path) if event.summary.value}


@pytest.mark.parametrize("name", sorted(FLAGS))
def test_an_old_run_resumes_at_its_last_checkpoint(name, runs):
    logdir, result = runs["resume", name]
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    assert "Finished at step 8" in result.stdout
    # cycles 5..8 ran, two per loop; none of 1..4 again
    assert [int(step) for step in re.findall(r"step (\d+)/8", result.stdout)] == [6, 8]
    assert summary_steps(logdir) == {6, 8}
    checkpoint = tf.train.latest_checkpoint(str(logdir / "checkpoints"))
    assert checkpoint.endswith("ckpt-8")
    assert tf.train.load_variable(checkpoint, "step/.ATTRIBUTES/VARIABLE_VALUE") == 8
    # each optimizer's 4 old updates (restored) and 4 new ones
    iterations = {name.split("/")[1]: int(tf.train.load_variable(checkpoint, name))
                  for name, _ in tf.train.list_variables(checkpoint)
                  if name.startswith("optimizers/") and "/_iterations/" in name}
    assert iterations == {"discriminator": 8, "generator": 8}


@pytest.mark.parametrize("reference", [reference for _, _, reference in SAMPLES])
def test_an_old_run_samples_what_it_sampled_before(reference, runs):
    directory, result = runs["sample", reference]
    output = directory / "samples.npy"
    assert result.returncode == 0, result.stderr[-3000:]
    before = np.load(os.path.join(FIXTURES, "samples", reference))
    drawn = np.load(output)
    assert drawn.shape == before.shape == (6, 28, 28, 1) and drawn.dtype == np.uint8
    # The images span only ~25 grey levels (4 cycles of a width-4 net), so a level here and
    # there is all that float reordering may change: the raw generator in place of the EMA one
    # differs by 0.29 levels on average.
    difference = np.abs(drawn.astype(int) - before.astype(int))
    assert difference.max() <= 1 and difference.mean() <= 0.01
