"""The flags of the modes other than training (owner "modes", read by every setup): what
--mode=sample draws and writes, which checkpoint sample, eval and export read, and the
export's name, version, format and quantization.

Declared when imported (`trainers.config.flags.declare`); `trainers.api` imports every owner's
flags module in the order Config's fields and docs/flags.md list them. Pure Python: flags are
checked before TensorFlow is imported.
"""

from __future__ import annotations

from trainers.config.choices import EXPORT_FORMATS, QUANTIZATIONS
from trainers.config.flags import DIRECTORY, FILE, Flag, declare


declare(
    "modes",
    Flag('num_samples', int, 64,
         help='--mode=sample: how many samples to draw (with --interpolate: how many rows; a '
              'conditional run without --label: spread over one row per class; cyclegan: how many '
              'test images to translate).',
         hparam=False),
    Flag('output', str, 'samples.png',
         help='--mode=sample: the file to write, .png (an image grid; toys: a scatter plot) or .npy'
              ' (uint8 NHWC images; toys: float32 points); --mode=plot: the .png (default '
              'LOGDIR/curves.png).',
         path=FILE, written_by=('sample',)),
    Flag('checkpoint', str, 'latest',
         help='Which checkpoint --mode=sample, eval and export read: latest; best, the one kept by '
              '--eval_every (by FID; toys: by modes and high-quality samples); or a step number N, '
              'the kept checkpoint of step N in LOGDIR/checkpoints (see --checkpoint_every, '
              '--keep_checkpoints).',
         hparam=False),
    Flag('real_vs_real', bool, False,
         help='--mode=eval: metrics of the train split against the test split (the floor).',
         hparam=False),
    Flag('grid', str, '',
         help='--mode=sample: draw ROWSxCOLUMNS samples as a grid, e.g. 8x8.',
         hparam=False),
    Flag('interpolate', int, 0,
         help='--mode=sample: rows of this many images, each a slerp between two noise vectors '
              '(ends included); --num_samples rows (0: off).',
         hparam=False),
    Flag('truncation', float, 0.0,
         help='--mode=sample: redraw noise values with |z| above this threshold (0: off).',
         hparam=False),
    Flag('export_dir', str, None,
         help='--mode=export: where exports go (default LOGDIR/export); writes '
              'EXPORT_DIR/NAME/VERSION.',
         path=DIRECTORY, written_by=('export',)),
    Flag('export_name', str, 'generator',
         help="--mode=export: the model's name, a directory under --export_dir.",
         hparam=False),
    Flag('export_version', int, None,
         help="--mode=export: numeric version directory (default: the checkpoint's step).",
         hparam=False),
    Flag('export_format', str, 'saved_model',
         help='--mode=export: a SavedModel, or a SavedModel plus model.tflite, or plus tfjs/ (a '
              'TensorFlow.js model and an offline page; needs `make tfjs`).',
         choices=EXPORT_FORMATS, hparam=False),
    Flag('quantize', str, 'none',
         help='weight quantization: none, float16 or dynamic_int8 for --export_format=tflite; none,'
              ' float16 or uint8 for --export_format=tfjs.',
         choices=QUANTIZATIONS, hparam=False),
    common=True,
)
