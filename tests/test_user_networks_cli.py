"""`run.py --generator=module:function --discriminator=...` as a user runs it: a module of
their own on PYTHONPATH trains and resumes; sample and export (through the Python API, whose
modes are run.py's) then run in a fresh process that cannot import that module, from the
architectures saved in LOGDIR/networks."""

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from tests.cli import ENV, ROOT, run

MODULE = "my_gan_nets"
NETWORK_FLAGS = [f"--generator={MODULE}:make_generator",
                 f"--discriminator={MODULE}:make_discriminator"]
FRESH_PROCESS = f"""
import importlib.util, json, sys
sys.path.insert(0, {ROOT!r})
from trainers import api
assert importlib.util.find_spec({MODULE!r}) is None
sampled = api.sample(sys.argv[1], num_samples=6, seed=3, output=sys.argv[2] + "/samples.npy")
exported = api.export(sys.argv[1], export_dir=sys.argv[2] + "/exports")
print(json.dumps({{"path": exported.path, "step": exported.step, "count": len(sampled),
                  "imported": sorted(m for m in sys.modules if m.startswith({MODULE!r}))}}))
"""


@pytest.fixture(scope="module")
def user_run(tmp_path_factory):
    """2 cycles, then resumed to 4, of the user's networks from a module only on PYTHONPATH."""
    nets = tmp_path_factory.mktemp("nets")
    shutil.copy(os.path.join(ROOT, "tests", "trainers", "setups", "user_models.py"),
                nets / f"{MODULE}.py")
    logdir = tmp_path_factory.mktemp("cli") / "run"
    flags = ["--batch_size=16", "--latent_dim=16", "--cycles_per_loop=2", "--shuffle_buffer=256",
             *NETWORK_FLAGS, f"--logdir={logdir}", "--checkpoint_every=2",
             "--image_every=0", "--histogram_every=0"]
    first = run(*flags, "--train_cycles=2", env={"PYTHONPATH": str(nets)})
    assert first.returncode == 0, first.stderr[-3000:]
    saved = {name: (logdir / "networks" / name).read_bytes()
             for name in os.listdir(logdir / "networks")}
    resumed = run(*flags, "--train_cycles=4", env={"PYTHONPATH": str(nets)})
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    return logdir, saved, resumed


def test_user_networks_train_resume_and_are_saved_once(user_run):
    logdir, saved, resumed = user_run
    assert sorted(saved) == ["discriminator.keras", "generator.keras"]
    assert {name: (logdir / "networks" / name).read_bytes() for name in saved} == saved
    assert "Finished at step 4" in resumed.stdout
    recorded = json.loads((logdir / "config.json").read_text())
    assert recorded["generator"] == f"{MODULE}:make_generator"
    checkpoint = tf.train.latest_checkpoint(str(logdir / "checkpoints"))
    assert checkpoint.endswith("ckpt-4")
    # The user's generator, not the built-in one: a Dense of 7*7*4 units on 16 noise values.
    shapes = dict(tf.train.list_variables(checkpoint))
    assert shapes["optimizers/generator/_trainable_variables/0/.ATTRIBUTES/VARIABLE_VALUE"] == [16, 196]


def test_sample_and_export_run_without_the_users_module(user_run, tmp_path):
    logdir, _, _ = user_run
    fresh = subprocess.run([sys.executable, "-c", FRESH_PROCESS, str(logdir), str(tmp_path)],
                           cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=300)
    assert fresh.returncode == 0, fresh.stderr[-3000:]
    result = json.loads(fresh.stdout.strip().splitlines()[-1])
    assert result["imported"] == [] and result["step"] == 4 and result["count"] == 6
    drawn = np.load(tmp_path / "samples.npy")
    assert drawn.shape == (6, 28, 28, 1) and drawn.dtype == np.uint8
    model = tf.saved_model.load(result["path"])
    images = model.signatures["seed"](seed=tf.constant(3, tf.int64), count=tf.constant(6))["images"]
    np.testing.assert_array_equal(images.numpy(), drawn)
