"""The Python API: run.py's config resolution, training with Keras models passed directly
(resumed exactly), sample/evaluate/export return values (README's example runs in
tests/test_docs.py)."""

import json
import os
import pathlib
import shutil
import sys

import numpy as np
import pytest
import tensorflow as tf

from tests.cli import ROOT, run
from trainers import api
from trainers.config.flags import ConfigError

MODULE = "my_api_nets"
TINY = dict(dataset="ring8", batch_size=16, latent_dim=4, cycles_per_loop=2, shuffle_buffer=64,
            checkpoint_every=2, image_every=0, histogram_every=0)


@pytest.fixture(scope="module")
def nets(tmp_path_factory):
    """The user's module, importable only while this module's tests run (a custom layer)."""
    directory = tmp_path_factory.mktemp("nets")
    shutil.copy(os.path.join(ROOT, "tests", "trainers", "setups", "user_models.py"),
                directory / f"{MODULE}.py")
    sys.path.insert(0, str(directory))
    try:
        yield __import__(MODULE)
    finally:
        sys.path.remove(str(directory))
        sys.modules.pop(MODULE, None)


def networks(nets):
    """A generator model instance and a discriminator function (with a custom layer)."""
    generator = nets.make_generator(latent_dim=4, shape=(2,), num_classes=0, classifier=False)
    return dict(generator=generator, discriminator=nets.make_discriminator_with_custom_layer)


@pytest.fixture(scope="module")
def runs(nets, tmp_path_factory):
    """The same models trained for 4 cycles straight, and for 2 then resumed to 4."""
    root = tmp_path_factory.mktemp("api")
    models = networks(nets)
    straight = api.train(api.config(logdir=str(root / "straight"), train_cycles=4, **TINY), **models)
    api.train(api.config(logdir=str(root / "resumed"), train_cycles=2, **TINY), **models)
    resumed = api.train(api.config(logdir=str(root / "resumed"), train_cycles=4, **TINY), **models)
    return straight, resumed


def variables(checkpoint: str) -> dict[str, np.ndarray]:
    """Every variable of a checkpoint (models, optimizer slots, step), without its graph."""
    return {name: tf.train.load_variable(checkpoint, name)
            for name, _ in tf.train.list_variables(checkpoint)
            if name not in ("_CHECKPOINTABLE_OBJECT_GRAPH", "save_counter/.ATTRIBUTES/VARIABLE_VALUE")}


def test_training_with_models_passed_directly_resumes_exactly(runs):
    straight, resumed = runs
    assert (straight.step, resumed.step) == (4, 4)
    assert resumed.checkpoint.endswith("ckpt-4")
    first, second = variables(straight.checkpoint), variables(resumed.checkpoint)
    assert sorted(first) == sorted(second) and len(first) >= 20
    for name in first:
        np.testing.assert_array_equal(first[name], second[name], err_msg=name)
    recorded = json.loads(pathlib.Path(resumed.logdir, "config.json").read_text())
    assert recorded["generator"] == "instance:Functional"
    assert recorded["discriminator"] == f"{MODULE}:make_discriminator_with_custom_layer"


def test_sample_evaluate_and_export_return_values(runs, tmp_path):
    _, resumed = runs
    points = api.sample(resumed.logdir, num_samples=10, output=str(tmp_path / "points.npy"))
    assert points.shape == (10, 2) and points.dtype == np.float32
    np.testing.assert_array_equal(np.load(tmp_path / "points.npy"), points)
    metrics = api.evaluate(resumed.logdir)
    assert metrics["step"] == 4 and 0 <= metrics["modes"] <= 8
    exported = api.export(resumed.logdir, export_dir=str(tmp_path / "exports"))
    assert exported.path == str(tmp_path / "exports" / "generator" / "4")
    points = tf.saved_model.load(exported.path).signatures["serving_default"](
        noise=tf.zeros([3, 4]))["points"]
    assert points.shape == (3, 2)


def test_a_resume_with_other_networks_is_refused(runs, nets):
    _, resumed = runs
    with pytest.raises(ConfigError) as raised:
        api.train(api.config(logdir=resumed.logdir, train_cycles=6, **TINY),
                  generator=nets.make_generator, discriminator=nets.make_discriminator_with_custom_layer)
    assert f"--generator='{MODULE}:make_generator' (was 'instance:Functional')" in str(raised.value)


def test_a_network_given_twice_is_refused(nets, tmp_path):
    config = api.config(logdir=str(tmp_path / "run"), generator=f"{MODULE}:make_generator", **TINY)
    with pytest.raises(ConfigError, match="--generator='my_api_nets:make_generator' and a "
                                          "generator passed to train\\(\\): give one of them."):
        api.train(config, generator=nets.make_generator)


def test_sampling_without_the_module_of_a_custom_layer_names_it(runs):
    _, resumed = runs
    result = run("--mode=sample", f"--logdir={resumed.logdir}", f"--output={resumed.logdir}/s.png")
    assert result.returncode == 2
    assert (f"uses custom Keras classes from module '{MODULE}', which cannot be imported here "
            f"(No module named '{MODULE}'); add the directory that holds {MODULE}.py to PYTHONPATH "
            "(or sys.path) and rerun." in result.stderr)
    assert "Traceback" not in result.stderr


def test_config_resolves_flags_as_run_py_does(tmp_path):
    logdir = tmp_path / "run"
    logdir.mkdir()
    # A run recorded with another preset value keeps it on resume; a flag given explicitly wins.
    (logdir / "config.json").write_text(json.dumps({"setup": "dcgan", "d_lr": 0.0005}))
    assert api.config(logdir=str(logdir)).d_lr == 0.0005
    assert api.config(logdir=str(logdir), d_lr=0.001).d_lr == 0.001
    assert api.config(logdir=str(tmp_path / "new")).d_lr == 2e-4  # the dcgan preset
    with pytest.raises(ConfigError, match="Unknown flag\\(s\\) no_such_flag"):
        api.config(no_such_flag=1)
    with pytest.raises(ConfigError, match="--batch_size=0 is invalid"):
        api.config(batch_size=0)

