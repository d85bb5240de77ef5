"""`--mode=export`: a run's generator as a SavedModel for TensorFlow Serving, or as TFLite.

The run's setup says what is exported (`Setup.export_archive`: the endpoints below for the
GAN setups, a refusal for those that cannot be exported); this mode owns the layout, the
conversion to TFLite and the atomic write.

Layout: `EXPORT_DIR/NAME/VERSION/` (`--export_dir`, default LOGDIR/export; `--export_name`;
`--export_version`, default the checkpoint's step), which is what TF Serving's model base path
expects. The version directory holds the SavedModel, `export.json` (where it came from), and
with `--export_format=tflite` also `model.tflite`, converted from that SavedModel, and with
`--export_format=tfjs` also `tfjs/`, a TensorFlow.js model with an offline page (see
`trainers.modes.tfjs`).

SavedModel signatures (the sampling generator: the EMA one when the run keeps it, unless
`--nouse_ema`):
- `serving_default`: `noise` float32 [N, latent_dim] -> `images` uint8 [N, H, W, C] (pixels
  as `images.to_uint8` maps them), or `points` float32 [N, 2] for a 2-D toy run.
- `seed`: `seed` int64 scalar, `count` int32 scalar -> the same outputs for the noise
  `run.py --mode=sample --seed=SEED --num_samples=COUNT` draws (`setups.draws.sample_noise`).
A class-conditional run (`--setup=cgan`, `acgan`) takes the class too: `serving_default` adds
`labels` int32 [N] (one class index per noise row), `seed` adds `label` int32 scalar (every
image of that class, as `--mode=sample --label=LABEL` draws them). Labels outside
[0, num_classes) are not checked in the graph (the class input becomes all zeros); export.json
lists the class names by index.
The TFLite model has `serving_default` only: the stateless random ops behind `seed` are not
TFLite builtins.

The generator is always rebuilt in float32 (mixed-precision weights are stored in float32),
so exports of mixed-precision runs convert too. Nothing half-written is ever visible: the
version is built in a hidden sibling directory and renamed into place; TF Serving ignores
non-numeric names, and any failure removes it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import uuid
from typing import Iterator

import tensorflow as tf

from datasets import files
from trainers.config.flags import Config, ConfigError
from trainers.modes import restore, tfjs
from trainers.setups import registry

EXPORT_SUBDIR = "export"
SERVING_SIGNATURE = "serving_default"
TFLITE_FILE = "model.tflite"
METADATA_FILE = "export.json"


@dataclasses.dataclass(frozen=True)
class Exported:
    """One written export: its version directory, source, and the sizes of its artefacts."""

    path: str
    checkpoint: str
    step: int
    generator: str
    sizes: dict[str, int]


def convert_to_tflite(saved_model_dir: str, *, quantize: str) -> bytes:
    """The `serving_default` signature as a TFLite flatbuffer.

    quantize: "none" (float32), "float16" (weights stored as float16, about half the size) or
    "dynamic_int8" (dynamic-range quantization: int8 weights, activations quantized on the fly;
    tensors under 1024 elements stay float).
    """
    converter = tf.lite.TFLiteConverter.from_saved_model(saved_model_dir,
                                                         signature_keys=[SERVING_SIGNATURE])
    if quantize == "float16":
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.target_spec.supported_types = [tf.float16]
    elif quantize == "dynamic_int8":
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
    elif quantize != "none":
        raise ValueError(f"quantize={quantize!r} is unknown; use none, float16 or dynamic_int8.")
    return converter.convert()


def export_path(config: Config, step: int) -> str:
    """EXPORT_DIR/NAME/VERSION for this config and a checkpoint written at `step`."""
    root = config.export_dir or os.path.join(config.logdir, EXPORT_SUBDIR)
    version = step if config.export_version is None else config.export_version
    return os.path.join(root, config.export_name, str(version))


def export(config: Config) -> Exported:
    """Writes the exported model of the `--checkpoint` of `config.logdir` (see the module doc).

    Raises ConfigError, before writing anything, when the run has no checkpoint, its setup
    cannot be exported, or the version directory already exists.
    """
    if config.export_format == "tfjs":
        tfjs.require_toolchain()
    checkpoint = restore.chosen_checkpoint(config.logdir, config.checkpoint)
    target = export_path(config, restore.checkpoint_step(checkpoint))
    _refuse_existing(target)
    restored = restore.restore(config.logdir, use_ema=config.use_ema, precision="float32",
                               checkpoint=checkpoint)
    exported = registry.get(restored.run.setup).export_archive(config, restored)
    with _staged_directory(target) as staging:
        exported.archive.write_out(staging, verbose=False)
        if config.export_format == "tflite":
            with open(os.path.join(staging, TFLITE_FILE), "wb") as file:
                file.write(convert_to_tflite(staging, quantize=config.quantize))
        if config.export_format == "tfjs":
            tfjs.write(staging, exported.metadata, quantize=config.quantize)
        metadata = {"checkpoint": os.path.abspath(checkpoint), "step": restored.step,
                    "generator": exported.model, "format": config.export_format,
                    "quantize": config.quantize, **exported.metadata}
        files.write_json(os.path.join(staging, METADATA_FILE), metadata)
        sizes = _artefact_sizes(staging)
    return Exported(path=target, checkpoint=checkpoint, step=restored.step,
                    generator=exported.model, sizes=sizes)


def _refuse_existing(target: str) -> None:
    if os.path.exists(target):
        raise ConfigError(
            f"{target} already exists; an export never overwrites a version. Choose another "
            "--export_version (or --export_name / --export_dir), or delete that directory.")


@contextlib.contextmanager
def _staged_directory(target: str) -> Iterator[str]:
    """Yields an empty hidden directory next to `target`, renamed to `target` on success.

    On any failure the staging directory, and every parent this call created, are removed.
    """
    parent = os.path.dirname(os.path.abspath(target))
    created = []
    directory = parent
    while not os.path.exists(directory):
        created.append(directory)
        directory = os.path.dirname(directory)
    os.makedirs(parent, exist_ok=True)
    staging = os.path.join(parent, f".{os.path.basename(target)}.{uuid.uuid4().hex}.tmp")
    os.mkdir(staging)
    try:
        yield staging
        _refuse_existing(target)
        os.rename(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        for directory in created:
            with contextlib.suppress(OSError):
                os.rmdir(directory)
        raise


def _artefact_sizes(directory: str) -> dict[str, int]:
    """Bytes of the SavedModel (graph plus variables) and of the TFLite file, when present."""
    saved_model = 0
    for folder, _, names in os.walk(directory):
        saved_model += sum(os.path.getsize(os.path.join(folder, name)) for name in names
                           if name not in (TFLITE_FILE, METADATA_FILE)
                           and os.path.relpath(folder, directory).split(os.sep)[0] != tfjs.SUBDIR)
    sizes = {"saved_model": saved_model}
    if os.path.exists(os.path.join(directory, TFLITE_FILE)):
        sizes[TFLITE_FILE] = os.path.getsize(os.path.join(directory, TFLITE_FILE))
    converted = os.path.join(directory, tfjs.SUBDIR)
    if os.path.isdir(converted):
        sizes["tfjs model"] = sum(os.path.getsize(os.path.join(converted, name))
                                  for name in os.listdir(converted)
                                  if name == "model.json" or name.endswith(".bin") and name != "noise.bin")
    return sizes
