"""--export_format=tfjs: the page in headless Chromium draws what the SavedModel draws.

A dcgan, a cgan and an R3GAN cgan export (tiny synthetic runs), each served from 127.0.0.1 with every
other host unresolvable; the browser is driven over the DevTools protocol on a pipe.
"""

import dataclasses
import os
import subprocess

import numpy as np
import pytest
import tensorflow as tf

from tests.trainers.browser import Browser, serve
from tests.trainers.synthetic_run import write_run
from trainers.config.flags import ConfigError
from trainers.modes import export, tfjs
from trainers.setups import draws

PIXELS = """(async () => {{
  await window.rendering;
  const canvas = {canvas};
  const data = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data;
  return Array.from(data.filter((_, i) => i % 4 === 0));
}})()"""
GRID_IMAGE = PIXELS.format(canvas='document.querySelector("#grid canvas")')
CURRENT_IMAGE = PIXELS.format(canvas='document.getElementById("current")')


# The runs exported: by setup, and a cgan run of the R3GAN networks (grouped convolutions, the
# low-pass resampling), which have no spectral norm.
RUNS = {"dcgan": dict(setup="dcgan"), "cgan": dict(setup="cgan"),
        "r3gan": dict(setup="cgan", arch="r3gan", d_spectral_norm=False, r3gan_group_width=4)}


@pytest.fixture(scope="module", params=list(RUNS))
def page(request, tmp_path_factory):
    """An export opened in the browser, with the page loaded: (browser, version dir, run)."""
    root = tmp_path_factory.mktemp(request.param)
    run = write_run(root / "run", distinct_classes=True, **RUNS[request.param])
    result = export.export(dataclasses.replace(run.config, export_format="tfjs"))
    server = serve(os.path.join(result.path, tfjs.SUBDIR))
    browser = Browser(f"http://127.0.0.1:{server.server_port}/index.html", root / "profile")
    browser.wait_until_ready()
    yield browser, result, run
    browser.close()
    server.shutdown()


def _set(browser, element, value, event):
    """Sets a control as a user would and fires the event the page listens to."""
    browser.evaluate(f'(() => {{ const e = document.getElementById("{element}"); e.value = {value};'
                     f'e.dispatchEvent(new Event("{event}")); }})()')


def _served(result, noise, labels=None):
    loaded = tf.saved_model.load(result.path)
    inputs = {"noise": tf.constant(noise)}
    if labels is not None:
        inputs["labels"] = tf.constant(labels, tf.int32)
    return loaded.signatures["serving_default"](**inputs)["images"].numpy()


def test_the_page_draws_the_saved_models_images_for_the_seed(page):
    browser, result, run = page
    _set(browser, "seed", 3, "change")
    pixels = np.array(browser.evaluate(GRID_IMAGE)).reshape(28, 28)
    noise = np.fromfile(os.path.join(result.path, "tfjs", "noise.bin"), "<f4").reshape(16, 16, 8)
    np.testing.assert_array_equal(noise[3], draws.sample_noise(3, 16, (8,)).numpy())
    labels = [0] if run.config.setup == "cgan" else None
    expected = _served(result, noise[3][:1], labels)[0, :, :, 0].astype(int)
    assert pixels.std() > 20
    assert np.abs(pixels - expected).max() <= 3


def test_slider_and_class_selector_change_the_picture(page):
    browser, _, run = page
    _set(browser, "slider", 0, "input")
    start = np.array(browser.evaluate(CURRENT_IMAGE))
    _set(browser, "slider", 1, "input")
    end = np.array(browser.evaluate(CURRENT_IMAGE))
    assert np.abs(start - end).mean() > 1
    if run.config.setup == "cgan":
        before = np.array(browser.evaluate(GRID_IMAGE))
        _set(browser, "class", 1, "change")
        after = np.array(browser.evaluate(GRID_IMAGE))
        assert np.abs(before - after).mean() > 1


def test_new_samples_draws_fresh_noise_each_time_and_a_seed_brings_its_grid_back(page):
    browser, _, _ = page
    _set(browser, "seed", 3, "change")
    seeded = np.array(browser.evaluate(GRID_IMAGE))
    grids = []
    for _ in range(2):
        browser.evaluate('document.getElementById("next").click()')
        grids.append(np.array(browser.evaluate(GRID_IMAGE)))
    assert np.abs(grids[0] - seeded).mean() > 1 and np.abs(grids[1] - grids[0]).mean() > 1
    assert browser.evaluate('document.getElementById("seed").value') == ""  # no seed: fresh draws
    _set(browser, "seed", 3, "change")
    np.testing.assert_array_equal(np.array(browser.evaluate(GRID_IMAGE)), seeded)


def test_missing_converter_is_a_config_error_naming_make_tfjs(tmp_path, monkeypatch):
    monkeypatch.setattr(tfjs, "CONVERTER", str(tmp_path / "absent"))
    run = write_run(tmp_path / "run")
    with pytest.raises(ConfigError, match="make tfjs"):
        export.export(dataclasses.replace(run.config, export_format="tfjs"))
    assert not os.path.exists(os.path.join(run.config.logdir, "export"))


def test_a_toy_run_is_refused_and_leaves_nothing(tmp_path):
    run = write_run(tmp_path / "ring", dataset="ring8", ema=False, latent_dim=4)
    with pytest.raises(ConfigError, match="--export_format=tfjs draws images"):
        export.export(dataclasses.replace(run.config, export_format="tfjs"))
    assert not os.path.exists(os.path.join(run.config.logdir, "export"))


@pytest.mark.parametrize("quantize", ["float16", "uint8"])
def test_each_quantization_flag_reaches_the_converter_before_its_paths(quantize, tmp_path,
                                                                       monkeypatch):
    """A quantization flag takes an optional list of names: after the options it swallowed the
    input path once. The real converter's uint8 output: tests/test_export_cli.py."""
    commands = []

    def converter(command, **kwargs):
        commands.append(command)
        return subprocess.CompletedProcess(command, 1, "", "stopped here")

    monkeypatch.setattr(tfjs.subprocess, "run", converter)
    run = write_run(tmp_path / "run")
    with pytest.raises(ConfigError, match="stopped here"):
        export.export(dataclasses.replace(run.config, export_format="tfjs", quantize=quantize))
    [command] = commands
    assert command[1] == f"--quantize_{quantize}"
    assert all(part.startswith("--") for part in command[1:-2])
    assert os.path.basename(command[-1]) == tfjs.SUBDIR and os.path.dirname(command[-1]) == command[-2]
