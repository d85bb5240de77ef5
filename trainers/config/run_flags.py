"""The flags of what a run is (owner "run", read by every setup): the mode, the setup, the data and
its resolution, the run directory, the seed and the batch. They stay in trainers.config, not in
the api layer, because the config layer itself reads them: the run record and its resume
(`record`, `source_run`), the path checks (`paths`), the batch split (`batch`) and the presets
(`presets`) all take --mode, --setup, --logdir, --dataset or --batch_size, and a module may not
import a layer above its own.

Declared when imported (`flags.declare`); `trainers.api` imports every owner's flags module in
the order Config's fields and docs/flags.md list them. Pure Python: flags are checked before
TensorFlow is imported.
"""

from __future__ import annotations

from trainers.config.flags import DIRECTORY, Flag, declare

MODES = ("train", "sample", "eval", "export", "plot", "train_evaluator")


declare(
    "run",
    Flag('mode', str, 'train',
         help='What to do: train (or resume) the run in --logdir; sample from, evaluate or export '
              'one of its checkpoints (--checkpoint); plot its training curves; or train_evaluator:'
              ' train the classifier of --dataset that --evaluator=domain uses.',
         choices=MODES, hparam=False),
    Flag('setup', str, 'dcgan',
         help='What to train; its preset fills every preset flag it reads that is left unset '
              '(loss, optimizer, learning rates, betas, batch size, updates per cycle, penalty, '
              'clipping, discriminator normalization, top-k).',
         fixed_on_resume=True,
         renamed_from=('gan',)),
    Flag('dataset', str, 'fashion_mnist',
         help='fashion_mnist, stacked_fashion_mnist (three of its images as RGB: 1,000 modes), '
              'ring8, grid25, tfds:<name> (any TFDS image dataset), or folder:PATH '
              '(the PNG, JPEG, BMP and GIF files under PATH, searched recursively; one sub-folder '
              'per class gives the classes).',
         fixed_on_resume=True),
    Flag('data_dir', str, None,
         help='TFDS data directory (prepared data is reused; downloads go here).',
         path=DIRECTORY),
    Flag('fashion_mnist_dir', str, None,
         help='Folder with the four Fashion-MNIST IDX .gz files, read when --data_dir holds no '
              'prepared copy (default /usr/share/datasets/fashion-mnist).',
         path=DIRECTORY),
    Flag('resolution', int, None,
         help="Image side in pixels: 28, 32, 64, 128 or 256; default: the dataset's own.",
         fixed_on_resume=True),
    Flag('channels', int, None,
         help='folder:PATH datasets: convert the images to 1 (grayscale) or 3 (RGB) channels; '
              "default: the files' own (1 when all are grayscale, else 3).",
         fixed_on_resume=True),
    Flag('batch_size', int, None,
         help='Global batch size, split over replicas (preset default).',
         fixed_on_resume=True, preset=True, neutral=64),
    Flag('logdir', str, 'runs/default',
         help='Run directory: TensorBoard events, checkpoints, config.json. Rerun to resume. '
              '--mode=eval writes its metrics into LOGDIR/eval/.',
         path=DIRECTORY, written_by=('train', 'eval')),
    Flag('seed', int, 0,
         help='Seed for weight initialisation, data order, noise and sampling.',
         fixed_on_resume=True),
    Flag('shuffle_buffer', int, 10000,
         help='Shuffle buffer size (examples).',
         fixed_on_resume=True),
    common=True,
)
