"""`--export_format=tfjs`: the exported SavedModel as a TensorFlow.js graph model plus a page.

The official converter (`tensorflowjs_converter`, PyPI `tensorflowjs`) pins an older TensorFlow
than Gantry's, so it lives in its own virtual environment, `.venv-tfjs`, which `make tfjs`
creates together with `tf.min.js` taken from the npm package `@tensorflow/tfjs` of the same
version. This module only runs the converter as a subprocess and copies the library file.

VERSION/tfjs/ holds `model.json` plus weight shards (the `serving_default` signature), the
library, `index.html` (works offline from any static server), and the noise the page uses:
`noise.bin`, float32 [SEEDS, SAMPLES, latent_dim], the rows `--mode=sample --seed=S` draws for
seeds 0..SEEDS-1. That noise comes from TensorFlow's stateless Philox normal sampler, which
TF.js does not reproduce, so the export writes it instead of the page drawing it; `page.json`
says which seeds, the sample count and the class names.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import numpy as np

from datasets import files
from trainers.config.flags import ConfigError
from trainers.setups import draws

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONVERTER = os.path.join(ROOT, ".venv-tfjs", "bin", "tensorflowjs_converter")
LIBRARY = os.path.join(ROOT, ".cache", "tfjs", "tf.min.js")
PAGE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tfjs_page.html")
SUBDIR = "tfjs"
SEEDS = 16
SAMPLES = 16
QUANTIZE_FLAGS = {"none": [], "float16": ["--quantize_float16"], "uint8": ["--quantize_uint8"]}


def require_toolchain() -> None:
    """ConfigError naming `make tfjs` when the converter or the library file is missing."""
    missing = [path for path in (CONVERTER, LIBRARY) if not os.path.exists(path)]
    if missing:
        raise ConfigError(
            f"--export_format=tfjs needs {' and '.join(missing)}; run `make tfjs` once (it "
            "creates .venv-tfjs with the pinned tensorflowjs converter and fetches tf.min.js "
            "from npm).")


def write(version_dir: str, metadata: dict, *, quantize: str) -> None:
    """Converts the SavedModel in `version_dir` into `version_dir/tfjs` with the page.

    Raises ConfigError for a run that does not draw images (the page draws pictures; a 2-D toy
    run's points have none), and with the converter's output when conversion fails (nothing is
    left behind: the export writes into a temporary directory).
    """
    if metadata.get("kind") != "image":
        raise ConfigError(f"--export_format=tfjs draws images, and this run generates "
                          f"{metadata.get('kind')}; export it as --export_format=saved_model.")
    target = os.path.join(version_dir, SUBDIR)
    # The quantization flags take an optional list of weight names: they go before other
    # options, or they would swallow the input path.
    command = [CONVERTER, *QUANTIZE_FLAGS[quantize], "--input_format=tf_saved_model",
               "--output_format=tfjs_graph_model", "--signature_name=serving_default",
               "--saved_model_tags=serve", version_dir, target]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode:
        raise ConfigError(f"--export_format=tfjs: tensorflowjs_converter failed (exit "
                          f"{result.returncode}) on this SavedModel; export it with "
                          f"--export_format=saved_model or tflite instead. The converter said:\n"
                          f"{result.stdout}{result.stderr}")
    shutil.copy(LIBRARY, os.path.join(target, "tf.min.js"))
    shutil.copy(PAGE, os.path.join(target, "index.html"))
    latent_dim = metadata["latent_dim"]
    noise = np.stack([draws.sample_noise(seed, SAMPLES, (latent_dim,)).numpy()
                      for seed in range(SEEDS)]).astype("<f4")
    noise.tofile(os.path.join(target, "noise.bin"))
    files.write_json(os.path.join(target, "page.json"), {
        "seeds": SEEDS, "samples": SAMPLES, "latent_dim": latent_dim,
        "output_shape": metadata["output_shape"], "num_classes": metadata.get("num_classes", 0),
        "class_names": metadata.get("class_names"), "quantize": quantize})
