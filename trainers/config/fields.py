"""The flags Gantry's parts share, declared by owner (`flags.declare`), the part that reads them.

Every setup reads the common owners: what a run is and reads (run), how it trains (training),
what it writes while training (outputs), when and on how much it is evaluated (evaluation), and
the other modes' flags (modes). The others are read by the setups that name them in
`Setup.flag_owners`: a generator's rate, updates and width (generator); the adversarial loss
and a discriminator's rate, updates and width (discriminator); the --arch networks drawn from
noise (architecture) and the --arch discriminator's options (discriminator architecture); the
GAN game's penalties, clipping, augmentation, packing and top-k (adversarial); the EMA
generator (ema); differential privacy (privacy); the features image metrics are computed on
(features). A setup's own flags are declared in its module (`trainers.setups`). `Config` and
`ConfigError` are `trainers.config.flags`'.

Each owner's values are the constants below, which validation and the owners' code read.
Pure Python: flags are checked before TensorFlow is imported.
"""

from __future__ import annotations

from gan import architecture_names
from trainers.config.flags import (DIRECTORY, FILE, REQUIRED, Config, ConfigError, Flag, declare,
                                   declared)

MODES = ("train", "sample", "eval", "export", "plot", "train_evaluator")
CHECKPOINT_CHOICES = ("latest", "best")  # or a step number
STRATEGIES = ("auto", "default", "one_device", "mirrored", "multi_worker")
OPTIMIZERS = ("adam", "rmsprop")
LOSSES = ("minimax", "non_saturating", "wasserstein", "hinge", "least_squares")
PENALTIES = ("none", "gradient_penalty", "one_sided_gradient_penalty", "dragan", "r1", "r2")
# The penalties taken at interpolates between a real and a fake image (WGAN-GP and its one-sided
# form): what batch norm, class labels and differential privacy each refuse.
INTERPOLATING_PENALTIES = ("gradient_penalty", "one_sided_gradient_penalty")
NORMALIZATIONS = ("none", "batch", "layer")
UPSAMPLINGS = ("transposed", "nearest", "bilinear")
ARCHS = architecture_names.NAMES
DTYPE_POLICIES = ("float32", "mixed_bfloat16", "mixed_float16")  # what Keras takes
PRECISIONS = (*DTYPE_POLICIES, "auto")
LEARNING_RATE_SCHEDULES = ("constant", "linear", "cosine", "inverse_sqrt")
NAN_POLICIES = ("stop", "rollback")
EXPORT_FORMATS = ("saved_model", "tflite", "tfjs")
QUANTIZATIONS = ("none", "float16", "dynamic_int8", "uint8")
QUANTIZATIONS_BY_FORMAT = {"saved_model": ("none",), "tflite": ("none", "float16", "dynamic_int8"),
                           "tfjs": ("none", "float16", "uint8")}
UPDATE_ORDERS = ("alternating", "simultaneous")
# --train_cycles when it is not given and --train_time is not either.
DEFAULT_TRAIN_CYCLES = 6000


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
         help='fashion_mnist, ring8, grid25, tfds:<name> (any TFDS image dataset), or folder:PATH '
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

declare(
    "training",
    Flag('train_cycles', int, None,
         help='Training cycles; each cycle is d_updates discriminator + g_updates generator updates '
              '(default 6000; with --train_time: no cycle limit).',
         renamed_from=('train_steps',)),
    Flag('train_time', str, '',
         help='Wall-clock training budget, e.g. 90s, 10m, 2h (empty: none): train until it is used '
              'up, or, with --train_cycles given too, until either is reached. A resume trains only '
              'the time left.'),
    Flag('cycles_per_loop', int, 50,
         help='Cycles run inside one compiled call.',
         hparam=False,
         renamed_from=('steps_per_loop',)),
    Flag('strategy', str, 'auto',
         help='Distribution strategy. auto: mirrored over several GPUs, one_device on one GPU, '
              'mirrored over --cpu_replicas CPU devices when more than 1, else default; '
              'multi_worker: one process per worker, configured by TF_CONFIG.',
         choices=STRATEGIES),
    Flag('cpu_replicas', int, 1,
         help='Split the CPU into this many logical devices (mirrored training without GPUs).'),
    Flag('checkpoint_every', int, 500,
         help='Save a checkpoint every N cycles (0: only at the end).',
         hparam=False),
    Flag('keep_checkpoints', int, 3,
         help='How many recent checkpoints to keep.',
         hparam=False),
    Flag('init_from', str, None,
         help='Fine-tuning: a new run starts from the model weights of the run in this directory '
              '(its newest checkpoint, or with :STEP its kept checkpoint of that step): each model '
              'it trains, and its EMA generator, from the model of the same name, which must have '
              'the same shapes (other data is fine if its images have the same shape); optimizers '
              'and the step start fresh. A resume continues from the run\'s own checkpoints. '
              'Empty: weights initialised from --seed.',
         path=DIRECTORY, fixed_on_resume=True),
    Flag('optimizer', str, None,
         help='Optimizer for both models (preset default).',
         choices=OPTIMIZERS, fixed_on_resume=True, preset=True, neutral=REQUIRED),
    Flag('beta1', float, None,
         help='Adam beta_1 (preset default).',
         preset=True, neutral=REQUIRED),
    Flag('beta2', float, None,
         help='Adam beta_2 (preset default).',
         preset=True, neutral=REQUIRED),
    Flag('precision', str, 'auto',
         help='float32, or mixed precision (outputs and losses stay float32); auto: mixed_bfloat16 '
              'where the hardware computes bfloat16 natively, else float32 (and float32 with a user'
              " network; a resume keeps the run's own).",
         choices=PRECISIONS, fixed_on_resume=True, neutral="float32"),
    Flag('lr_warmup_cycles', int, 0,
         help='Linear learning-rate warm-up over this many cycles (0: none).',
         renamed_from=('lr_warmup_steps',)),
    Flag('lr_hold_cycles', int, None,
         help='An inverse_sqrt schedule keeps the full rate for this many cycles N, then multiplies'
              ' it by sqrt(N / cycle): a run of N cycles or fewer trains at constant rates, a '
              'longer one at falling rates, whatever its --train_cycles or --train_time (preset '
              'default: 10000 for dcgan, 5000 for wgan, 0 otherwise).',
         preset=True, neutral=0,
         renamed_from=('lr_hold_steps',)),
    Flag('lr_multipliers', str, '',
         help='Per-variable learning rates REGEX=FACTOR[,REGEX=FACTOR...], e.g. '
              "generator/seed=0,discriminator/down0=0.1 (G's first block frozen, D's slowed). The "
              "first regex found in a trained variable's name (<model>/<layer>/<weight>, e.g. "
              'generator/seed/kernel) multiplies its rate and schedule, 0 freezes it, unmatched '
              'ones keep 1. A resume may change factors but not the patterns or which factors are '
              '0.'),
    Flag('nan_policy', str, 'stop',
         help='On a NaN/Inf loss or gradient: stop, or roll back to the last checkpoint.',
         choices=NAN_POLICIES),
    Flag('nan_lr_factor', float, 0.5,
         help='With --nan_policy=rollback, multiply every learning rate by this.'),
    Flag('max_rollbacks', int, 3,
         help='With --nan_policy=rollback, stop after this many rollbacks.'),
    Flag('deterministic', bool, False,
         help='Deterministic ops (bit-identical reruns and resumes on CPU; slower on GPU).'),
    Flag('jit_compile', bool, False,
         help="Compile each update's forward and backward passes with XLA (one replica for image "
              'GANs). XLA draws different noise for the same seed: keep it fixed across resumes.'),
    common=True,
)

declare(
    "generator",
    Flag('g_lr', float, None,
         help='Generator learning rate (preset default).',
         preset=True, neutral=REQUIRED),
    Flag('g_lr_schedule', str, None,
         help='Generator learning-rate schedule: constant; a linear or half-cosine decay to 0 at '
              '--train_cycles or at the end of --train_time, whichever comes first; or inverse_sqrt,'
              ' which reads no end (see --lr_hold_cycles). Preset default: inverse_sqrt for dcgan '
              'and wgan, constant otherwise.',
         choices=LEARNING_RATE_SCHEDULES, preset=True, neutral='constant'),
    Flag('g_clip_global_norm', float, 0.0,
         help="Clip the generator's gradient to this global norm (0: off)."),
    Flag('g_updates', int, None,
         help='Generator updates per cycle (preset default).',
         fixed_on_resume=True, preset=True, neutral=1,
         renamed_from=('g_steps',)),
    Flag('g_width', int, 64,
         help='Base channel width of the generator.',
         fixed_on_resume=True),
)

declare(
    "discriminator",
    Flag('loss', str, None,
         help='Adversarial loss (preset default).',
         choices=LOSSES, fixed_on_resume=True, preset=True, neutral=REQUIRED),
    Flag('d_lr', float, None,
         help='Discriminator learning rate (preset default).',
         preset=True, neutral=REQUIRED),
    Flag('d_lr_schedule', str, None,
         help='Discriminator learning-rate schedule: constant; a linear or half-cosine decay to 0 '
              'at --train_cycles or at the end of --train_time, whichever comes first; or '
              'inverse_sqrt, which reads no end (see --lr_hold_cycles). Preset default: inverse_sqrt'
              ' for dcgan and wgan, constant otherwise.',
         choices=LEARNING_RATE_SCHEDULES, preset=True, neutral='constant'),
    Flag('d_clip_global_norm', float, 0.0,
         help="Clip the discriminator's gradient to this global norm (0: off)."),
    Flag('d_updates', int, None,
         help='k: discriminator updates per cycle (preset default).',
         fixed_on_resume=True, preset=True, neutral=REQUIRED,
         renamed_from=('d_steps',)),
    Flag('d_width', int, 64,
         help='Base channel width of the discriminator.',
         fixed_on_resume=True),
)

declare(
    "architecture",
    Flag('arch', str, 'dcgan',
         help='Image networks: dcgan (strided convolutions, Radford et al.) or resnet (the residual'
              ' generator and discriminator of SN-GAN and BigGAN; --d_spectral_norm applies, the '
              'DCGAN-only flags --g_extra_blocks, --g_upsample, --d_extra_blocks, --d_dropout and '
              '--d_normalization do not).',
         choices=ARCHS, fixed_on_resume=True),
    Flag('latent_dim', int, 100,
         help="Size of the generator's noise vector.",
         fixed_on_resume=True),
    Flag('g_extra_blocks', int, 0,
         help='3x3 stride-1 convolution blocks added to the generator at each resolution (0: the '
              'DCGAN generator).',
         fixed_on_resume=True),
    Flag('g_upsample', str, 'transposed',
         help='How the generator doubles its side: transposed (4x4 stride-2 transposed '
              'convolutions, DCGAN), nearest or bilinear (resize, then a 3x3 convolution, as in '
              "SN-GAN's and BigGAN's ResNets; ~2x the generator's compute at 28 px).",
         choices=UPSAMPLINGS, fixed_on_resume=True),
)

declare(
    "discriminator architecture",
    Flag('d_extra_blocks', int, 0,
         help='3x3 stride-1 convolution blocks added to the discriminator after each stride-2 '
              'convolution (0: the DCGAN discriminator).',
         fixed_on_resume=True),
    Flag('d_dropout', float, 0.0,
         help='Dropout rate after each discriminator activation, in training only (0: off; the '
              'TensorFlow DCGAN tutorial uses 0.3).',
         fixed_on_resume=True),
    Flag('d_normalization', str, None,
         help='Normalization in the discriminator (preset default).',
         choices=NORMALIZATIONS, fixed_on_resume=True, preset=True, neutral='none'),
    Flag('d_spectral_norm', bool, None,
         help='Spectral normalization of every discriminator layer (preset default).',
         fixed_on_resume=True, preset=True, neutral=False),
)

declare(
    "adversarial",
    Flag('penalty', str, None,
         help='Discriminator regulariser (preset default).',
         choices=PENALTIES, fixed_on_resume=True, preset=True, neutral='none'),
    Flag('penalty_weight', float, None,
         help='Weight of the penalty (preset default).',
         preset=True, neutral=0.0),
    Flag('penalty_every', int, None,
         help='Lazy regularization: apply the penalty every N cycles with weight x N x --d_updates, '
              'the discriminator updates it stands in for (preset default; 1 = in every '
              'discriminator update).',
         fixed_on_resume=True, preset=True, neutral=1),
    Flag('penalty_ramp_cycles', int, 0,
         help='Ramp the penalty weight from 0 to --penalty_weight over this many cycles.',
         renamed_from=('penalty_ramp_steps',)),
    Flag('clip_value', float, None,
         help='WGAN weight clipping bound, 0 for none (preset default).',
         preset=True, neutral=0.0),
    Flag('consistency_weight', float, 0.0,
         help='Consistency regularization (bCR) weight on real images (0: off).'),
    Flag('diffaugment', str, '',
         help='DiffAugment policy for discriminator inputs, e.g. color,translation,cutout (empty: '
              'none).'),
    Flag('update_order', str, 'alternating',
         help='alternating: discriminator then generator updates, each with its own forward pass; '
              'simultaneous (k=1): both updates from one shared forward pass (the TensorFlow DCGAN '
              "tutorial's faster, slightly different algorithm).",
         choices=UPDATE_ORDERS, fixed_on_resume=True),
    Flag('pack', int, 1,
         help='PacGAN packing: the discriminator judges this many samples at once (stacked along '
              'features or channels), which penalises mode collapse (1: off).',
         fixed_on_resume=True),
    Flag('topk', float, None,
         help='Top-k generator training (Sinha et al. 2020): each generator update learns only from'
              ' this fraction of its fakes, those the discriminator scores as most real (1: off; '
              'paper: 0.5-0.75; preset default: 0.5 for dcgan, 1 otherwise).',
         preset=True, neutral=1.0),
    Flag('topk_decay_cycles', int, None,
         help='Lower the kept fraction from 1 to --topk linearly over this many cycles (0: --topk '
              'from the start; preset default: 5000 for dcgan).',
         preset=True, neutral=0,
         renamed_from=('topk_decay_steps',)),
)

declare(
    "ema",
    Flag('ema_halflife_kimg', float, 0.0,
         help='Keep an EMA generator with this half-life in thousands of images (0: none); '
              '--use_ema picks it for samples, evaluations and exports.',
         fixed_on_resume=True),
    Flag('ema_rampup', float, 0.0,
         help='EMA ramp-up: half-life at most this fraction of the images seen (0: none).'),
    Flag('use_ema', bool, True,
         help='Sample, evaluate and export with the EMA generator when the run keeps one '
              "(--ema_halflife_kimg), also in training's sample grids and evaluations."),
)

# Differential privacy of the discriminator phase (`adversarial.assemble_phases`); a resume keeps
# the mechanism, whose updates `engine.privacy.spent` composes as one (the delta is reporting only).
declare(
    "privacy",
    Flag('dp_l2_clip', float, 0.0,
         help='Differential privacy (DP-SGD on the discriminator, the only model that reads real '
              "data): clip each example's (or microbatch's) discriminator gradient to this L2 norm "
              '(0: off; needs --dp_noise_multiplier).',
         fixed_on_resume=True),
    Flag('dp_noise_multiplier', float, 0.0,
         help='Differential privacy: Gaussian noise of std this x --dp_l2_clip added once per batch'
              ' to the summed clipped gradients (0: off).',
         fixed_on_resume=True),
    Flag('dp_microbatches', int, 0,
         help='Differential privacy: clip per microbatch, this many per batch (0: per example; '
              'fewer is faster, same privacy accounting).',
         fixed_on_resume=True),
    Flag('dp_delta', float, 0.0,
         help='Differential privacy: the delta at which epsilon is reported (0: 1 / the number of '
              'training examples).'),
)

declare(
    "outputs",
    Flag('image_every', int, 500,
         help='Write a sample grid (toys: a scatter plot) every N cycles (0: never).',
         hparam=False),
    Flag('histogram_every', int, 1000,
         help='Write weight and gradient histograms every N cycles (0: never).',
         hparam=False),
    Flag('tensorflow_logs', bool, False,
         help="Show TensorFlow's own C++ log lines (INFO, WARNING and known-harmless ERROR "
              'lines are hidden by default).',
         hparam=False),
    common=True,
)

declare(
    "evaluation",
    Flag('eval_every', int, 0,
         help='Evaluate (FID, KID, precision/recall; toys: modes and high-quality samples) every N '
              'cycles and keep the best checkpoint by FID (toys: by modes and high-quality samples)'
              ' in LOGDIR/checkpoints_best (0: never).'),
    Flag('eval_samples', int, 2000,
         help='Generated (and real test) images per evaluation (toys: a fixed number of points).'),
    Flag('evaluator_dir', str, None,
         help='Cache folder of trained domain evaluators (default '
              '$XDG_CACHE_HOME/gantry/evaluators, else ~/.cache/gantry/evaluators).',
         path=DIRECTORY, written_by=('train_evaluator',)),
    Flag('evaluator_epochs', int, 3,
         help='--mode=train_evaluator: training epochs of the domain classifier.',
         hparam=False),
    Flag('evaluator_train_examples', int, 0,
         help='--mode=train_evaluator: use only this many training examples (0: all).',
         hparam=False),
    common=True,
)

declare(
    "features",
    Flag('evaluator', str, 'domain',
         help="Feature extractor: domain (Gantry's classifier, --mode=train_evaluator), inception "
              '(--inception_weights), or a .keras/.h5 model path.'),
    Flag('inception_weights', str, 'imagenet',
         help="InceptionV3 weights .h5 file, or imagenet for Keras's cache (never downloaded)."),
)

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



def learning_rate_schedule_flags() -> tuple[str, ...]:
    """Every declared flag that chooses a learning-rate schedule (--g_lr_schedule and the
    setups' own, such as --student_lr_schedule), in declaration order."""
    return tuple(flag.name for flag in declared().values()
                 if flag.choices == LEARNING_RATE_SCHEDULES)


__all__ = ("Config", "ConfigError")
