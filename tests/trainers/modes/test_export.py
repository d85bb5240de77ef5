"""The exported generator: SavedModel signatures, TFLite per quantization, atomic layout."""

import dataclasses
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from tests.trainers.synthetic_run import STEP, write_run
from tests.trainers.tflite_tolerance import TFLITE_TOLERANCE
from trainers.modes import export, restore
from trainers.modes import sample as sample_mode
from trainers.setups import draws
from trainers.setups.kinds import uint8_images
from trainers.outputs import images
from trainers.config.flags import ConfigError

ONLY_TENSORFLOW = """
import sys
import numpy as np
import tensorflow as tf
model = tf.saved_model.load(sys.argv[1])
images = model.signatures["serving_default"](noise=tf.constant(np.load(sys.argv[2])))["images"]
seeded = model.signatures["seed"](seed=tf.constant(5, tf.int64), count=tf.constant(4))["images"]
gantry = sorted(m for m in sys.modules if m.split(".")[0] in ("gan", "trainers", "datasets"))
assert not gantry, gantry
np.save(sys.argv[3], images.numpy())
np.save(sys.argv[4], seeded.numpy())
"""


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """A synthetic run with an EMA generator, exported as a SavedModel (default settings)."""
    run = write_run(tmp_path_factory.mktemp("export") / "run")
    result = export.export(run.config)
    return run, result


def _noise(count, latent_dim=8, seed=11):
    return tf.random.stateless_normal([count, latent_dim], seed=[seed, 0]).numpy()


def test_layout_is_export_dir_name_step_with_a_saved_model(exported):
    run, result = exported
    assert result.path == os.path.join(run.config.logdir, "export", "generator", str(STEP))
    assert result.step == STEP and result.generator == "generator_ema"
    assert {"saved_model.pb", "variables", "export.json"} <= set(os.listdir(result.path))
    assert os.listdir(os.path.dirname(result.path)) == [str(STEP)]
    metadata = json.loads(open(os.path.join(result.path, "export.json")).read())
    assert metadata["step"] == STEP and metadata["latent_dim"] == 8
    assert metadata["output_shape"] == [28, 28, 1] and metadata["format"] == "saved_model"
    assert result.sizes["saved_model"] > 0 and "model.tflite" not in result.sizes


def test_serving_signature_returns_the_ema_generators_uint8_images(exported):
    run, result = exported
    loaded = tf.saved_model.load(result.path)
    noise = _noise(6)
    served = loaded.signatures["serving_default"](noise=tf.constant(noise))["images"].numpy()
    assert served.dtype == np.uint8 and served.shape == (6, 28, 28, 1)
    expected = images.to_uint8(run.models["generator_ema"](noise, training=False).numpy())
    assert np.abs(served.astype(int) - expected).max() <= 1
    assert (served == expected).mean() > 0.999
    assert served.min() == 0 and served.max() == 255 and served.std() > 50
    raw = images.to_uint8(run.models["generator"](noise, training=False).numpy())
    assert np.abs(served.astype(int) - raw).mean() > 20


def test_seed_signature_draws_the_noise_of_sample_mode(exported, tmp_path):
    run, result = exported
    loaded = tf.saved_model.load(result.path)
    seeded = loaded.signatures["seed"](seed=tf.constant(5, tf.int64), count=tf.constant(4))["images"]
    noise = draws.sample_noise(5, 4, (8,))
    served = loaded.signatures["serving_default"](noise=noise)["images"]
    np.testing.assert_array_equal(seeded.numpy(), served.numpy())
    config = dataclasses.replace(run.config, mode="sample", seed=5, num_samples=4,
                                 output=str(tmp_path / "s.npy"))
    sample_mode.sample(config)
    assert np.abs(np.load(tmp_path / "s.npy").astype(int) - seeded.numpy()).max() <= 1


def test_saved_model_loads_with_tensorflow_alone(exported, tmp_path):
    _, result = exported
    loaded = tf.saved_model.load(result.path)
    noise = _noise(3)
    np.save(tmp_path / "noise.npy", noise)
    outputs = [tmp_path / "images.npy", tmp_path / "seeded.npy"]
    # cwd is outside the checkout, so gan/trainers/datasets cannot even be imported.
    completed = subprocess.run([sys.executable, "-c", ONLY_TENSORFLOW, result.path,
                                str(tmp_path / "noise.npy"), *map(str, outputs)],
                               cwd=tmp_path, capture_output=True, text=True, timeout=120,
                               env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert completed.returncode == 0, completed.stderr[-2000:]
    np.testing.assert_array_equal(
        np.load(outputs[0]), loaded.signatures["serving_default"](noise=tf.constant(noise))["images"])
    np.testing.assert_array_equal(
        np.load(outputs[1]),
        loaded.signatures["seed"](seed=tf.constant(5, tf.int64), count=tf.constant(4))["images"])


@pytest.mark.filterwarnings("ignore:.*tf.lite.Interpreter is deprecated:UserWarning")
@pytest.mark.parametrize("quantize", ["none", "float16", "dynamic_int8"])
def test_tflite_matches_the_saved_model_within_tolerance(exported, tmp_path, quantize):
    _, result = exported
    flatbuffer = export.convert_to_tflite(result.path, quantize=quantize)
    interpreter = tf.lite.Interpreter(model_content=flatbuffer)
    assert interpreter.get_signature_list() == {"serving_default": {"inputs": ["noise"],
                                                                     "outputs": ["images"]}}
    noise = _noise(16)
    lite = interpreter.get_signature_runner("serving_default")(noise=noise)["images"]
    reference = tf.saved_model.load(result.path).signatures["serving_default"](
        noise=tf.constant(noise))["images"].numpy()
    assert lite.dtype == np.uint8 and lite.shape == reference.shape == (16, 28, 28, 1)
    difference = np.abs(lite.astype(int) - reference.astype(int))
    print(f"tflite {quantize}: {len(flatbuffer)} bytes, max {difference.max()} "
          f"mean {difference.mean():.4f} levels")
    assert difference.max() <= TFLITE_TOLERANCE[quantize]["max"]
    assert difference.mean() <= TFLITE_TOLERANCE[quantize]["mean"]


@pytest.mark.filterwarnings("ignore:.*tf.lite.Interpreter is deprecated:UserWarning")
@pytest.mark.parametrize("networks", [{"arch": "resnet"}, {"g_upsample": "nearest"},
                                      {"arch": "r3gan", "r3gan_group_width": 4}])
def test_resized_upsampling_exports_and_converts_to_tflite_from_mixed_precision(tmp_path,
                                                                                networks):
    # Nearest upsampling once lost static shapes, which the TFLite converter could not lower.
    run = write_run(tmp_path / "run", precision="mixed_bfloat16", ema=False, **networks)
    result = export.export(run.config)
    flatbuffer = export.convert_to_tflite(result.path, quantize="none")
    noise = _noise(8)
    reference = tf.saved_model.load(result.path).signatures["serving_default"](
        noise=tf.constant(noise))["images"].numpy()
    lite = tf.lite.Interpreter(model_content=flatbuffer).get_signature_runner(
        "serving_default")(noise=noise)["images"]
    # The exported graph is the float32 rebuild of the bfloat16 run, as --mode=sample builds it.
    rebuilt = restore.restore(run.config.logdir, use_ema=False, precision="float32")
    np.testing.assert_array_equal(reference, uint8_images(rebuilt.built.sampling.sample(noise)).numpy())
    assert reference.shape == lite.shape == (8, 28, 28, 1)
    assert reference.min() < 64 and reference.max() > 192  # the scaled output layer spans 0..255
    difference = np.abs(lite.astype(int) - reference.astype(int))
    assert difference.max() <= TFLITE_TOLERANCE["none"]["max"]
    assert difference.mean() <= TFLITE_TOLERANCE["none"]["mean"]


def test_nouse_ema_exports_the_raw_generator_as_tflite(exported, tmp_path):
    run, _ = exported
    config = dataclasses.replace(run.config, use_ema=False, export_dir=str(tmp_path / "out"),
                                 export_name="raw", export_version=3, export_format="tflite",
                                 quantize="float16")
    result = export.export(config)
    assert result.path == str(tmp_path / "out" / "raw" / "3") and result.generator == "generator"
    assert 0 < result.sizes["model.tflite"] < result.sizes["saved_model"]
    noise = _noise(4)
    served = tf.saved_model.load(result.path).signatures["serving_default"](
        noise=tf.constant(noise))["images"].numpy()
    expected = images.to_uint8(run.models["generator"](noise, training=False).numpy())
    assert np.abs(served.astype(int) - expected).max() <= 1
    assert json.loads(open(os.path.join(result.path, "export.json")).read())["quantize"] == "float16"


def test_existing_version_is_refused_and_left_untouched(exported):
    run, result = exported
    before = sorted(os.listdir(result.path))
    with pytest.raises(ConfigError, match=f"{result.path} already exists"):
        export.export(run.config)
    assert sorted(os.listdir(result.path)) == before
    assert os.listdir(os.path.dirname(result.path)) == [str(STEP)]


def test_a_failed_conversion_leaves_nothing_behind(exported, tmp_path, monkeypatch):
    run, _ = exported

    def fail(*args, **kwargs):
        raise RuntimeError("conversion exploded")

    monkeypatch.setattr(export, "convert_to_tflite", fail)
    config = dataclasses.replace(run.config, export_dir=str(tmp_path / "new" / "exports"),
                                 export_format="tflite")
    with pytest.raises(RuntimeError, match="conversion exploded"):
        export.export(config)
    assert os.listdir(tmp_path) == []


def test_a_run_without_checkpoint_is_refused_before_writing(tmp_path):
    run = write_run(tmp_path / "run", ema=False)
    for name in os.listdir(tmp_path / "run" / "checkpoints"):
        os.remove(tmp_path / "run" / "checkpoints" / name)
    config = dataclasses.replace(run.config, export_dir=str(tmp_path / "exports"))
    with pytest.raises(ConfigError, match="has no checkpoint"):
        export.export(config)
    assert not (tmp_path / "exports").exists()


def test_toy_run_exports_float_points(tmp_path):
    run = write_run(tmp_path / "ring", dataset="ring8", ema=False, latent_dim=4)
    result = export.export(run.config)
    loaded = tf.saved_model.load(result.path)
    noise = _noise(5, latent_dim=4)
    points = loaded.signatures["serving_default"](noise=tf.constant(noise))["points"].numpy()
    assert points.dtype == np.float32 and points.shape == (5, 2)
    np.testing.assert_allclose(points, run.models["generator"](noise, training=False).numpy(),
                               rtol=1e-5, atol=1e-5)
    seeded = loaded.signatures["seed"](seed=tf.constant(0, tf.int64), count=tf.constant(3))["points"]
    assert seeded.shape == (3, 2)


def test_uint8_images_matches_to_uint8_on_boundaries():
    pixels = np.array([-2.0, -1.0, -0.5, 0.0, 0.01, 0.5, 1.0, 3.0], np.float32)
    np.testing.assert_array_equal(uint8_images(tf.constant(pixels)).numpy(),
                                  images.to_uint8(pixels))
    np.testing.assert_array_equal(images.to_uint8(pixels), [0, 0, 64, 128, 129, 191, 255, 255])
