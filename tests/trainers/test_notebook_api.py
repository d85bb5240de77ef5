"""The notebook API: training from a NumPy array and from a tf.data.Dataset (the same data, the
same run, resumed exactly), Keras callbacks per loop, the history as the event files hold it,
the generator as a Keras model, samples as arrays, and docs/python-api.md run top to bottom."""

import json
import os
import pathlib
import re

import keras
import numpy as np
import pytest
import tensorflow as tf

from datasets.errors import DatasetError
from tests.cli import ROOT
from trainers import api
from trainers.config.flags import ConfigError
from trainers.outputs import summaries
from trainers.setups import draws, kinds, registry

TINY = dict(batch_size=16, g_width=8, d_width=8, latent_dim=16, cycles_per_loop=2,
            shuffle_buffer=64, checkpoint_every=2, image_every=0, histogram_every=0,
            precision="float32")
IMAGES = np.random.default_rng(0).integers(0, 256, size=(48, 28, 28, 1), dtype=np.uint8)


class Recorder(keras.callbacks.Callback):
    """What a Keras callback is told: every call, in order, with its logs."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def on_train_begin(self, logs=None):
        self.calls.append(("begin", None, dict(logs or {}), self.model.name))

    def on_epoch_end(self, epoch, logs=None):
        self.calls.append(("loop", epoch, dict(logs), None))

    def on_train_end(self, logs=None):
        self.calls.append(("end", None, dict(logs), None))


class StopAt(keras.callbacks.Callback):
    """Asks the run to stop after the loop that reaches `step`, as EarlyStopping does."""

    def __init__(self, step):
        super().__init__()
        self.step = step

    def on_epoch_end(self, step, logs=None):
        self.model.stop_training = step >= self.step


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The array trained toward 6 cycles but stopped by a callback at 2, then resumed to 4
    (callbacks on the resume), and the same images as a tf.data.Dataset of batches trained 4
    cycles straight."""
    root = tmp_path_factory.mktemp("notebook")
    config = lambda name, cycles: api.config(logdir=str(root / name), train_cycles=cycles, **TINY)  # noqa: E731
    first = api.train(config("array", 6), IMAGES, callbacks=[StopAt(2)])
    recorder = Recorder()
    resumed = api.train(config("array", 4), IMAGES, callbacks=[recorder])
    straight = api.train(config("dataset", 4), tf.data.Dataset.from_tensor_slices(IMAGES).batch(10))
    return first, resumed, straight, recorder


def weights(checkpoint: str) -> dict[str, np.ndarray]:
    return {name: tf.train.load_variable(checkpoint, name)
            for name, _ in tf.train.list_variables(checkpoint) if "/.ATTRIBUTES/" in name}


def test_an_array_and_a_dataset_of_it_train_the_same_run_and_resume_exactly(runs):
    first, resumed, straight, _ = runs
    assert (first.step, resumed.step, straight.step) == (2, 4, 4)
    assert first.checkpoint.endswith("ckpt-2")  # the stop was checkpointed
    recorded = [json.loads(pathlib.Path(run.logdir, "dataset.json").read_text())
                for run in (resumed, straight)]
    assert recorded[0] == recorded[1]
    assert recorded[0]["name"].startswith("memory:") and recorded[0]["num_examples"] == 48
    assert recorded[0]["shape"] == [28, 28, 1] and recorded[0]["num_classes"] is None
    a, b = weights(resumed.checkpoint), weights(straight.checkpoint)
    assert sorted(a) == sorted(b) and len(a) >= 20
    for name in a:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)


def test_the_history_is_what_the_event_files_hold(runs):
    first, resumed, straight, _ = runs
    assert set(resumed.history) >= {"generator/loss", "discriminator/loss", "perf/images_per_second"}
    for tag, points in straight.history.items():
        assert points == summaries.read_scalars(straight.logdir, tag), tag
    # A resumed call returns its own loops; api.history reads the whole run's.
    assert {tag: [step for step, _ in points] for tag, points in resumed.history.items()} == {
        tag: [4] for tag in resumed.history}
    whole = api.history(resumed.logdir)
    assert whole["generator/loss"] == first.history["generator/loss"] + resumed.history["generator/loss"]


def test_callbacks_get_each_loop_s_logged_values(runs):
    _, resumed, _, recorder = runs
    logs = {tag: points[-1][1] for tag, points in resumed.history.items()}
    assert recorder.calls == [("begin", None, {}, "generator"), ("loop", 4, logs, None),
                              ("end", None, logs, None)]


def test_a_resume_with_other_data_or_none_is_refused_saying_what_it_needs(runs):
    _, resumed, _, _ = runs
    config = api.config(logdir=resumed.logdir, train_cycles=6, **TINY)
    fingerprint = json.loads(pathlib.Path(resumed.logdir, "config.json").read_text())["dataset"][7:]
    with pytest.raises(DatasetError, match=f"trained on in-memory data of fingerprint {fingerprint} "
                                           "\\(passed to api.train\\); the data given now has "
                                           "fingerprint"):
        api.train(config, IMAGES[::-1])
    with pytest.raises(DatasetError, match="and --dataset=fashion_mnist was given instead. Resume it "
                                           "from Python with the same arrays"):
        api.train(config)
    assert api.history(resumed.logdir)["generator/loss"][-1][0] == 4  # nothing trained
    with pytest.raises(DatasetError, match=f"--dataset=memory:{fingerprint} is in-memory data"):
        api.evaluate(resumed.logdir)  # its FID compares against the data


def test_the_loaded_generator_draws_what_sample_mode_draws(runs, tmp_path):
    _, resumed, _, _ = runs
    generator = api.load_generator(resumed.logdir)
    assert isinstance(generator, keras.Model) and generator.input_shape == (None, 16)
    assert generator.dtype_policy.name == "float32"
    samples = api.sample(resumed.logdir, num_samples=6, seed=5)
    assert samples.shape == (6, 28, 28, 1) and samples.dtype == np.uint8
    noise = draws.sample_noise(5, 6, (16,))
    np.testing.assert_array_equal(kinds.uint8_images(generator(noise)).numpy(), samples)
    assert not os.listdir(tmp_path)
    again = api.sample(resumed.logdir, num_samples=6, seed=5, output=str(tmp_path / "s.npy"))
    np.testing.assert_array_equal(np.load(tmp_path / "s.npy"), samples)
    np.testing.assert_array_equal(again, samples)


def test_sample_draws_a_npy_output_once_and_a_png_as_its_own_grid(runs, tmp_path, monkeypatch):
    _, resumed, _, _ = runs
    setup = registry.get("dcgan")
    outputs = []
    draw = setup.sample
    monkeypatch.setattr(setup, "sample", lambda config, restored: (
        outputs.append(os.path.basename(config.output)), draw(config, restored))[1])
    samples = api.sample(resumed.logdir, num_samples=6, seed=5, output=str(tmp_path / "s.npy"))
    assert outputs == ["s.npy"]  # one draw, straight into the output, read back as the array
    np.testing.assert_array_equal(np.load(tmp_path / "s.npy"), samples)
    api.sample(resumed.logdir, num_samples=6, seed=5, output=str(tmp_path / "grid.png"))
    assert outputs == ["s.npy", "samples.npy", "grid.png"]
    assert (tmp_path / "grid.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_wrong_data_or_callbacks_are_refused_before_training(tmp_path):
    config = api.config(logdir=str(tmp_path / "run"), train_cycles=2, **TINY)
    with pytest.raises(ValueError, match="data: float images must be finite and in \\[-1, 1\\]"):
        api.train(config, IMAGES.astype(np.float32))
    with pytest.raises(TypeError, match="callbacks: each must be a keras.callbacks.Callback; got "
                                        "function"):
        api.train(config, IMAGES, callbacks=[lambda step, logs: None])
    with pytest.raises(ConfigError, match="--dataset='ring8' and data passed to train\\(\\)"):
        api.train(api.config(logdir=str(tmp_path / "run"), dataset="ring8"), IMAGES)
    cgan = api.config(setup="cgan", logdir=str(tmp_path / "cgan"), train_cycles=2, **TINY)
    with pytest.raises(ConfigError, match="--setup=cgan is class-conditional and needs labelled "
                                          "images, but --dataset='memory:"):
        api.train(cgan, IMAGES)
    assert not (tmp_path / "run").exists() and not (tmp_path / "cgan").exists()


def python_blocks(path: str) -> list[str]:
    """The ```python blocks of a Markdown file, in order."""
    return re.findall(r"```python\n(.*?)```", pathlib.Path(ROOT, path).read_text(), re.S)


def test_the_python_api_guide_runs(tmp_path, monkeypatch):
    """docs/python-api.md's blocks, in order in one namespace, on a run 100x shorter."""
    code = "\n".join(python_blocks("docs/python-api.md"))
    small = code.replace('"/path/to/gantry"', repr(ROOT)).replace(
        "train_cycles=400", "train_cycles=4").replace("images[:6000]", "images[:64]").replace(
        "batch_size=64", "batch_size=16, g_width=8, d_width=8, precision='float32'")
    assert small.count("train_cycles=4,") == 1 and "images[:64]" in small and "g_width=8" in small
    monkeypatch.chdir(tmp_path)
    namespace = {}
    exec(compile(small, "docs/python-api.md", "exec"), namespace)
    assert namespace["trained"].step == 4
    assert namespace["samples"].shape == (16, 28, 28, 1)
    assert os.path.isfile(os.path.join(namespace["exported"].path, "saved_model.pb"))
