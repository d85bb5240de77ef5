"""`run.py --mode=export|sample|plot` as a user runs them, on one tiny mixed-precision run."""

import json
import os
import warnings

import matplotlib.image
import numpy as np
import pytest
import tensorflow as tf

from tests.cli import TINY, run
from tests.trainers.tflite_tolerance import TFLITE_TOLERANCE


@pytest.fixture(scope="module")
def bf16_run(tmp_path_factory):
    """2 cycles of a mixed_bfloat16 run with an EMA generator: its layers compute in bfloat16,
    which TFLite cannot convert unless export rebuilds the generator in float32."""
    logdir = tmp_path_factory.mktemp("cli") / "run"
    result = run(*TINY, f"--logdir={logdir}", "--train_cycles=2", "--checkpoint_every=2",
                 "--precision=mixed_bfloat16", "--ema_halflife_kimg=0.1", "--image_every=0",
                 "--histogram_every=0")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return logdir


@pytest.fixture(scope="module")
def tflite_export(bf16_run, tmp_path_factory):
    export_dir = tmp_path_factory.mktemp("exports")
    flags = ["--mode=export", f"--logdir={bf16_run}", f"--export_dir={export_dir}",
             "--export_format=tflite", "--quantize=dynamic_int8"]
    result = run(*flags)
    assert result.returncode == 0, result.stderr[-3000:]
    return export_dir / "generator" / "2", flags, result


def test_mixed_precision_run_exports_a_saved_model_and_tflite(tflite_export):
    version, _, result = tflite_export
    assert "Exported generator_ema of" in result.stdout and "(step 2)" in result.stdout
    assert str(version) in result.stdout
    assert "model.tflite" in result.stdout and "KiB" in result.stdout
    assert {"saved_model.pb", "variables", "model.tflite", "export.json"} <= set(os.listdir(version))
    assert os.listdir(version.parent) == ["2"]
    noise = tf.random.stateless_normal([8, 16], seed=[1, 2]).numpy()
    loaded = tf.saved_model.load(str(version))
    reference = loaded.signatures["serving_default"](noise=tf.constant(noise))["images"].numpy()
    assert reference.shape == (8, 28, 28, 1) and reference.dtype == np.uint8
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        interpreter = tf.lite.Interpreter(model_path=str(version / "model.tflite"))
    lite = interpreter.get_signature_runner("serving_default")(noise=noise)["images"]
    difference = np.abs(lite.astype(int) - reference.astype(int))
    assert difference.max() <= TFLITE_TOLERANCE["dynamic_int8"]["max"]
    assert difference.mean() <= TFLITE_TOLERANCE["dynamic_int8"]["mean"]


def test_exporting_the_same_version_again_is_refused(tflite_export):
    version, flags, _ = tflite_export
    before = sorted(os.listdir(version))
    result = run(*flags)
    assert result.returncode == 2
    assert f"{version} already exists" in result.stderr and "--export_version" in result.stderr
    assert "Traceback" not in result.stderr
    assert sorted(os.listdir(version)) == before and os.listdir(version.parent) == ["2"]


def test_export_without_a_checkpoint_is_refused_and_writes_nothing(bf16_run, tmp_path):
    logdir = tmp_path / "fresh"
    logdir.mkdir()
    (logdir / "config.json").write_text((bf16_run / "config.json").read_text())
    result = run("--mode=export", f"--logdir={logdir}")
    assert result.returncode == 2
    assert "has no checkpoint" in result.stderr and "Traceback" not in result.stderr
    assert sorted(os.listdir(logdir)) == ["config.json"]


@pytest.mark.parametrize("flags, expected", [
    (["--mode=export", "--export_format=onnx"], "--export_format='onnx'"),
    (["--mode=export", "--quantize=float16"], "--quantize='float16'"),
    (["--mode=export", "--export_version=-2"], "--export_version=-2"),
    (["--mode=sample", "--grid=8by8"], "--grid='8by8'"),
    (["--mode=sample", "--grid=2x2", "--interpolate=4"], "--grid='2x2'"),
    (["--mode=plot", "--output=curves.jpg"], "--output='curves.jpg'"),
])
def test_bad_flags_exit_2_naming_the_flag(flags, expected, tmp_path):
    result = run(*flags, f"--logdir={tmp_path}", timeout=60)
    assert result.returncode == 2 and expected in result.stderr
    assert "Traceback" not in result.stderr and os.listdir(tmp_path) == []


def test_sample_grid_png(bf16_run, tmp_path):
    result = run("--mode=sample", f"--logdir={bf16_run}", "--grid=3x4", f"--output={tmp_path / 'g.png'}")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Wrote 12 samples" in result.stdout
    assert matplotlib.image.imread(tmp_path / "g.png").shape[:2] == (3 * 28 + 4, 4 * 28 + 5)


def test_sample_truncated_interpolation_png(bf16_run, tmp_path):
    result = run("--mode=sample", f"--logdir={bf16_run}", "--interpolate=6", "--num_samples=2",
                 "--truncation=0.7", "--seed=4", f"--output={tmp_path / 'i.png'}")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Wrote 12 samples" in result.stdout
    assert matplotlib.image.imread(tmp_path / "i.png").shape[:2] == (2 * 28 + 3, 6 * 28 + 7)


def test_plot_mode_draws_the_curves(bf16_run):
    result = run("--mode=plot", f"--logdir={bf16_run}")
    assert result.returncode == 0, result.stderr[-2000:]
    assert str(bf16_run / "curves.png") in result.stdout
    # discriminator, generator and perf rows, 300 px each, 800 px wide.
    assert matplotlib.image.imread(bf16_run / "curves.png").shape[:2] == (900, 800)


def test_tfjs_export_writes_the_converted_model_and_its_offline_page(bf16_run, tmp_path):
    # The browser drives the page in tests/trainers/modes/test_tfjs.py; here run.py writes it.
    result = run("--mode=export", f"--logdir={bf16_run}", f"--export_dir={tmp_path}",
                 "--export_format=tfjs", "--quantize=uint8")
    assert result.returncode == 0, result.stderr[-3000:]
    page = tmp_path / "generator" / "2" / "tfjs"
    assert {"model.json", "index.html", "tf.min.js", "noise.bin", "page.json"} <= set(os.listdir(page))
    # Every float32 weight is stored as uint8 (the flag once swallowed the input path).
    manifest = json.loads((page / "model.json").read_text())
    weights = [w for group in manifest["weightsManifest"] for w in group["weights"]]
    quantized = [w for w in weights if w.get("quantization", {}).get("dtype") == "uint8"]
    assert weights and len(quantized) == len([w for w in weights if w["dtype"] == "float32"])
    assert f"to {page.parent} (saved_model " in result.stdout and ", tfjs model " in result.stdout
    assert os.path.getsize(page / "noise.bin") == 16 * 16 * 16 * 4  # seeds x samples x latent x f32
