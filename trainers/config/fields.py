"""The typed configuration of a run: every flag is one field of `Config`.

Each field carries its flag's help and, for a closed set of values, its choices (`field`):
`run.py` generates the absl flags from them, and `validate` checks every choice field with one
message shape. This module imports no TensorFlow, so flags are checked instantly.
"""

from __future__ import annotations

import dataclasses
from typing import Any

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
ARCHS = ("dcgan", "resnet")  # the keys of gan.architectures.ARCHITECTURES
DTYPE_POLICIES = ("float32", "mixed_bfloat16", "mixed_float16")  # what Keras takes
PRECISIONS = (*DTYPE_POLICIES, "auto")
LEARNING_RATE_SCHEDULES = ("constant", "linear", "cosine", "inverse_sqrt")
LEARNING_RATE_SCHEDULE_FLAGS = ("g_lr_schedule", "d_lr_schedule")
NAN_POLICIES = ("stop", "rollback")
EXPORT_FORMATS = ("saved_model", "tflite", "tfjs")
QUANTIZATIONS = ("none", "float16", "dynamic_int8", "uint8")
QUANTIZATIONS_BY_FORMAT = {"saved_model": ("none",), "tflite": ("none", "float16", "dynamic_int8"),
                           "tfjs": ("none", "float16", "uint8")}
UPDATE_ORDERS = ("alternating", "simultaneous")
DIRECTIONS = ("ab", "ba")


# --train_steps when it is not given and --train_time is not either.
DEFAULT_TRAIN_STEPS = 6000


class ConfigError(ValueError):
    """A flag has a bad value; the message says which, why and how to fix it."""


DIRECTORY, FILE = "directory", "file"


def field(default: Any, *, help: str, choices: tuple[str, ...] = (), path: str | None = None,
          written_by: tuple[str, ...] = ()) -> Any:
    """A `Config` field whose metadata holds its flag's `help`, valid `choices` and, for a
    path, what it names.

    `choices` is the closed set of values the flag takes: `run.py` lists it after the help and
    `validate` refuses anything else. A field whose values are known only at run time (`gan`,
    named by the setups that register themselves) has none; `run.py` lists those names itself.
    `path` (DIRECTORY or FILE) marks a filesystem path, and `written_by` the modes that write
    it: `paths.check_paths` checks both before any work starts.
    """
    return dataclasses.field(default=default, metadata={
        "help": help, "choices": choices, "path": path, "written_by": written_by})


@dataclasses.dataclass(frozen=True)
class Config:
    """Every knob of a run. Preset fields are None until `resolve_preset` fills them, and
    `train_steps` until `resolve_train_steps` does (None after it: no cycle limit)."""

    mode: str = field(
        "train", choices=MODES,
        help="What to do: train (or resume) the run in --logdir; sample from, evaluate or "
             "export one of its checkpoints (--checkpoint); plot its training curves; or "
             "train_evaluator: train the classifier of --dataset that --evaluator=domain uses.")
    gan: str = field(
        "dcgan",
        help="What to train; its preset fills every preset flag left unset (loss, optimizer, "
             "learning rates, betas, batch size, d_steps, g_steps, penalty, clipping, "
             "discriminator normalization, top-k).")
    dataset: str = field(
        "fashion_mnist",
        help="fashion_mnist, ring8, grid25, tfds:<name> (any TFDS image dataset), or "
             "folder:PATH (the PNG, JPEG, BMP and GIF files under PATH, searched recursively; "
             "one sub-folder per class gives the classes).")
    data_dir: str | None = field(
        None, path=DIRECTORY, help="TFDS data directory (prepared data is reused; downloads go here).")
    fashion_mnist_dir: str | None = field(
        None, path=DIRECTORY, help="Folder with the four Fashion-MNIST IDX .gz files, read when --data_dir holds "
                   "no prepared copy (default /usr/share/datasets/fashion-mnist).")
    resolution: int | None = field(
        None, help="Image side in pixels: 28, 32, 64, 128 or 256; default: the dataset's own.")
    channels: int | None = field(
        None, help="folder:PATH datasets: convert the images to 1 (grayscale) or 3 (RGB) "
                   "channels; default: the files' own (1 when all are grayscale, else 3).")
    batch_size: int | None = field(
        None, help="Global batch size, split over replicas (preset default).")
    train_steps: int | None = field(
        None, help=f"Training cycles; each cycle is d_steps discriminator + g_steps generator "
                   f"updates (default {DEFAULT_TRAIN_STEPS}; with --train_time: no cycle limit).")
    train_time: str = field(
        "", help="Wall-clock training budget, e.g. 90s, 10m, 2h (empty: none): train until it is "
                 "used up, or, with --train_steps given too, until either is reached. A resume "
                 "trains only the time left.")
    steps_per_loop: int = field(50, help="Cycles run inside one compiled call.")
    strategy: str = field(
        "auto", choices=STRATEGIES,
        help="Distribution strategy. auto: mirrored over several GPUs, one_device on one GPU, "
             "mirrored over --cpu_replicas CPU devices when more than 1, else default; "
             "multi_worker: one process per worker, configured by TF_CONFIG.")
    cpu_replicas: int = field(
        1, help="Split the CPU into this many logical devices (mirrored training without GPUs).")
    logdir: str = field(
        "runs/default", path=DIRECTORY, written_by=("train", "eval"),
        help="Run directory: TensorBoard events, checkpoints, config.json. Rerun to resume. "
             "--mode=eval writes its metrics into LOGDIR/eval/.")
    image_every: int = field(
        500, help="Write a sample grid (toys: a scatter plot) every N cycles (0: never).")
    histogram_every: int = field(
        1000, help="Write weight and gradient histograms every N cycles (0: never).")
    checkpoint_every: int = field(
        500, help="Save a checkpoint every N cycles (0: only at the end).")
    keep_checkpoints: int = field(3, help="How many recent checkpoints to keep.")
    seed: int = field(0, help="Seed for weight initialisation, data order, noise and sampling.")
    latent_dim: int = field(100, help="Size of the generator's noise vector.")
    g_width: int = field(64, help="Base channel width of the generator.")
    d_width: int = field(64, help="Base channel width of the discriminator.")
    arch: str = field(
        "dcgan", choices=ARCHS,
        help="Image networks: dcgan (strided convolutions, Radford et al.) or resnet (the "
             "residual generator and discriminator of SN-GAN and BigGAN; --d_spectral_norm "
             "applies, the DCGAN-only flags --g_extra_blocks, --g_upsample, --d_extra_blocks, "
             "--d_dropout and --d_normalization do not).")
    g_extra_blocks: int = field(
        0, help="3x3 stride-1 convolution blocks added to the generator at each resolution "
                "(0: the DCGAN generator).")
    g_upsample: str = field(
        "transposed", choices=UPSAMPLINGS,
        help="How the generator doubles its side: transposed (4x4 stride-2 transposed "
             "convolutions, DCGAN), nearest or bilinear (resize, then a 3x3 convolution, as in "
             "SN-GAN's and BigGAN's ResNets; ~2x the generator's compute at 28 px).")
    d_extra_blocks: int = field(
        0, help="3x3 stride-1 convolution blocks added to the discriminator after each stride-2 "
                "convolution (0: the DCGAN discriminator).")
    d_dropout: float = field(
        0.0, help="Dropout rate after each discriminator activation, in training only (0: off; "
                  "the TensorFlow DCGAN tutorial uses 0.3).")
    shuffle_buffer: int = field(10_000, help="Shuffle buffer size (examples).")
    num_samples: int = field(
        64, help="--mode=sample: how many samples to draw (with --interpolate: how many rows; a "
                 "conditional run without --label: spread over one row per class; cyclegan: "
                 "how many test images to translate).")
    output: str = field(
        "samples.png", path=FILE, written_by=("sample",),
        help="--mode=sample: the file to write, .png (an image grid; toys: a scatter plot) or "
             ".npy (uint8 NHWC images; toys: float32 points); --mode=plot: the .png (default "
             "LOGDIR/curves.png).")
    loss: str | None = field(None, choices=LOSSES, help="Adversarial loss (preset default).")
    optimizer: str | None = field(
        None, choices=OPTIMIZERS, help="Optimizer for both models (preset default).")
    g_lr: float | None = field(None, help="Generator learning rate (preset default).")
    d_lr: float | None = field(None, help="Discriminator learning rate (preset default).")
    beta1: float | None = field(None, help="Adam beta_1 (preset default).")
    beta2: float | None = field(None, help="Adam beta_2 (preset default).")
    d_steps: int | None = field(
        None, help="k: discriminator updates per cycle (preset default).")
    g_steps: int | None = field(None, help="Generator updates per cycle (preset default).")
    penalty: str | None = field(
        None, choices=PENALTIES, help="Discriminator regulariser (preset default).")
    penalty_weight: float | None = field(None, help="Weight of the penalty (preset default).")
    clip_value: float | None = field(
        None, help="WGAN weight clipping bound, 0 for none (preset default).")
    d_normalization: str | None = field(
        None, choices=NORMALIZATIONS, help="Normalization in the discriminator (preset default).")
    penalty_every: int | None = field(
        None, help="Lazy regularization: apply the penalty every N cycles with weight x N x "
                   "--d_steps, the discriminator updates it stands in for (preset default; 1 = "
                   "in every discriminator update).")
    d_spectral_norm: bool | None = field(
        None, help="Spectral normalization of every discriminator layer (preset default).")
    diffaugment: str = field(
        "", help="DiffAugment policy for discriminator inputs, e.g. color,translation,cutout "
                 "(empty: none).")
    consistency_weight: float = field(
        0.0, help="Consistency regularization (bCR) weight on real images (0: off).")
    eval_every: int = field(
        0, help="Evaluate (FID, KID, precision/recall; toys: modes and high-quality samples) "
                "every N cycles and keep the best checkpoint by FID (toys: by modes and "
                "high-quality samples) in LOGDIR/checkpoints_best (0: never).")
    eval_samples: int = field(
        2000, help="Generated (and real test) images per evaluation (toys: a fixed number of "
                   "points).")
    evaluator: str = field(
        "domain", help="Feature extractor: domain (Gantry's classifier, --mode=train_evaluator), "
                       "inception (--inception_weights), or a .keras/.h5 model path.")
    evaluator_dir: str | None = field(
        None, path=DIRECTORY, written_by=("train_evaluator",), help="Cache folder of trained domain evaluators (default "
                   "$XDG_CACHE_HOME/gantry/evaluators, else ~/.cache/gantry/evaluators).")
    inception_weights: str = field(
        "imagenet", help="InceptionV3 weights .h5 file, or imagenet for Keras's cache (never "
                         "downloaded).")
    checkpoint: str = field(
        "latest",
        help="Which checkpoint --mode=sample, eval and export read: latest; best, the one kept "
             "by --eval_every (by FID; toys: by modes and high-quality samples); or a step "
             "number N, the kept checkpoint of step N in LOGDIR/checkpoints (see "
             "--checkpoint_every, --keep_checkpoints).")
    real_vs_real: bool = field(
        False, help="--mode=eval: metrics of the train split against the test split (the floor).")
    evaluator_epochs: int = field(
        3, help="--mode=train_evaluator: training epochs of the domain classifier.")
    evaluator_train_examples: int = field(
        0, help="--mode=train_evaluator: use only this many training examples (0: all).")
    ema_halflife_kimg: float = field(
        0.0, help="Keep an EMA generator with this half-life in thousands of images (0: none); "
                  "--use_ema picks it for samples, evaluations and exports.")
    ema_rampup: float = field(
        0.0, help="EMA ramp-up: half-life at most this fraction of the images seen (0: none).")
    use_ema: bool = field(
        True, help="Sample, evaluate and export with the EMA generator when the run keeps one "
                   "(--ema_halflife_kimg), also in training's sample grids and evaluations.")
    g_clip_global_norm: float = field(
        0.0, help="Clip the generator's gradient to this global norm (0: off).")
    d_clip_global_norm: float = field(
        0.0, help="Clip the discriminator's gradient to this global norm (0: off).")
    precision: str = field(
        "auto", choices=PRECISIONS,
        help="float32, or mixed precision (outputs and losses stay float32); auto: "
             "mixed_bfloat16 where the hardware computes bfloat16 natively, else float32 (and "
             "float32 with a user network; a resume keeps the run's own).")
    g_lr_schedule: str | None = field(
        None, choices=LEARNING_RATE_SCHEDULES,
        help="Generator learning-rate schedule: constant; a linear or half-cosine decay to 0 "
             "at --train_steps or at the end of --train_time, whichever comes first; or "
             "inverse_sqrt, which reads no end (see --lr_hold_steps). Preset default: "
             "inverse_sqrt for dcgan and wgan, constant otherwise.")
    d_lr_schedule: str | None = field(
        None, choices=LEARNING_RATE_SCHEDULES,
        help="Discriminator learning-rate schedule: constant; a linear or half-cosine decay "
             "to 0 at --train_steps or at the end of --train_time, whichever comes first; or "
             "inverse_sqrt, which reads no end (see --lr_hold_steps). Preset default: "
             "inverse_sqrt for dcgan and wgan, constant otherwise.")
    lr_warmup_steps: int = field(
        0, help="Linear learning-rate warm-up over this many cycles (0: none).")
    lr_hold_steps: int | None = field(
        None, help="An inverse_sqrt schedule keeps the full rate for this many cycles N, then "
                   "multiplies it by sqrt(N / cycle): a run of N cycles or fewer trains at "
                   "constant rates, a longer one at falling rates, whatever its --train_steps or "
                   "--train_time (preset default: 10000 for dcgan, 5000 for wgan, 0 "
                   "otherwise).")
    lr_multipliers: str = field(
        "", help="Per-variable learning rates REGEX=FACTOR[,REGEX=FACTOR...], e.g. "
                 "generator/seed=0,discriminator/down0=0.1 (G's first block frozen, D's slowed). "
                 "The first regex found in a trained variable's name (<model>/<layer>/<weight>, "
                 "e.g. generator/seed/kernel) multiplies its rate and schedule, 0 freezes "
                 "it, unmatched ones keep 1. A resume may change factors but not the patterns or "
                 "which factors are 0.")
    penalty_ramp_steps: int = field(
        0, help="Ramp the penalty weight from 0 to --penalty_weight over this many cycles.")
    nan_policy: str = field(
        "stop", choices=NAN_POLICIES,
        help="On a NaN/Inf loss or gradient: stop, or roll back to the last checkpoint.")
    nan_lr_factor: float = field(
        0.5, help="With --nan_policy=rollback, multiply every learning rate by this.")
    max_rollbacks: int = field(
        3, help="With --nan_policy=rollback, stop after this many rollbacks.")
    deterministic: bool = field(
        False, help="Deterministic ops (bit-identical reruns and resumes on CPU; slower on GPU).")
    jit_compile: bool = field(
        False, help="Compile each update's forward and backward passes with XLA (one replica "
                    "for image GANs). XLA draws different noise for the same seed: keep it "
                    "fixed across resumes.")
    grid: str = field("", help="--mode=sample: draw ROWSxCOLUMNS samples as a grid, e.g. 8x8.")
    interpolate: int = field(
        0, help="--mode=sample: rows of this many images, each a slerp between two noise vectors "
                "(ends included); --num_samples rows (0: off).")
    truncation: float = field(
        0.0, help="--mode=sample: redraw noise values with |z| above this threshold (0: off).")
    export_dir: str | None = field(
        None, path=DIRECTORY, written_by=("export",), help="--mode=export: where exports go (default LOGDIR/export); writes "
                   "EXPORT_DIR/NAME/VERSION.")
    export_name: str = field(
        "generator", help="--mode=export: the model's name, a directory under --export_dir.")
    export_version: int | None = field(
        None, help="--mode=export: numeric version directory (default: the checkpoint's step).")
    export_format: str = field(
        "saved_model", choices=EXPORT_FORMATS,
        help="--mode=export: a SavedModel, or a SavedModel plus model.tflite, or plus tfjs/ (a "
             "TensorFlow.js model and an offline page; needs `make tfjs`).")
    quantize: str = field(
        "none", choices=QUANTIZATIONS,
        help="weight quantization: none, float16 or dynamic_int8 for --export_format=tflite; "
             "none, float16 or uint8 for --export_format=tfjs.")
    update_order: str = field(
        "alternating", choices=UPDATE_ORDERS,
        help="alternating: discriminator then generator updates, each with its own forward "
             "pass; simultaneous (k=1): both updates from one shared forward pass (the "
             "TensorFlow DCGAN tutorial's faster, slightly different algorithm).")
    label: str = field(
        "", help="Conditional --gan (cgan, acgan): --mode=sample draws only this class (index "
                 "or name, e.g. 7 or Sneaker); empty: one row per class.")
    aux_weight: float = field(1.0, help="acgan: weight of the auxiliary classification losses.")
    domain_a: str = field(
        "", help="cyclegan: domain A as DATASET[:CLASS[,CLASS...]] (e.g. fashion_mnist:Sneaker) "
                 "or a TFDS cycle_gan domain (e.g. tfds:cycle_gan/horse2zebra:A, splits "
                 "trainA/testA; needs --resolution).")
    domain_b: str = field("", help="cyclegan: domain B, same form as --domain_a.")
    cycle_weight: float = field(
        10.0, help="cyclegan: weight of the cycle-consistency (L1) losses.")
    identity_weight: float = field(
        5.0, help="cyclegan: weight of the identity (L1) losses (paper: half the cycle weight; "
                  "0: off).")
    pack: int = field(
        1, help="PacGAN packing: the discriminator judges this many samples at once (stacked "
                "along features or channels), which penalises mode collapse (1: off).")
    direction: str = field(
        "ab", choices=DIRECTIONS,
        help="cyclegan --mode=sample: translate test images of domain A to B (ab) or of B to A "
             "(ba).")
    topk: float | None = field(
        None, help="Top-k generator training (Sinha et al. 2020): each generator update learns "
                   "only from this fraction of its fakes, those the discriminator scores as most "
                   "real (1: off; paper: 0.5-0.75; preset default: 0.5 for dcgan, 1 otherwise).")
    topk_decay_steps: int | None = field(
        None, help="Lower the kept fraction from 1 to --topk linearly over this many cycles (0: "
                   "--topk from the start; preset default: 5000 for dcgan).")
    dp_l2_clip: float = field(
        0.0, help="Differential privacy (DP-SGD on the discriminator, the only model that reads "
                  "real data): clip each example's (or microbatch's) discriminator gradient to "
                  "this L2 norm (0: off; needs --dp_noise_multiplier).")
    dp_noise_multiplier: float = field(
        0.0, help="Differential privacy: Gaussian noise of std this x --dp_l2_clip added once "
                  "per batch to the summed clipped gradients (0: off).")
    dp_microbatches: int = field(
        0, help="Differential privacy: clip per microbatch, this many per batch (0: per "
                "example; fewer is faster, same privacy accounting).")
    dp_delta: float = field(
        0.0, help="Differential privacy: the delta at which epsilon is reported (0: 1 / the "
                  "number of training examples).")

    teacher: str = field(
        "", path=FILE,
        help="distill, dfad: the teacher, a .keras classifier of images in [-1, 1] to class logits; "
             "empty: the domain evaluator of --dataset (--mode=train_evaluator).")
    student_width: int = field(
        8, help="distill, dfad: base channel width of the student CNN (the domain evaluator's network, "
                "which has 32).")
    statistics_weight: float = field(
        1.0, help="dfad: weight of the teacher's batch-norm statistics prior in the generator's "
                  "loss (DeepInversion: its inputs' feature moments pulled towards those the "
                  "teacher stored on real data; 0, with --class_balance_weight=0: pure DFAD).")
    class_balance_weight: float = field(
        1.0, help="dfad: weight of the class-balance term in the generator's loss (log C minus "
                  "the entropy of the teacher's mean prediction over the batch; 0: off).")
    temperature: float = field(
        4.0, help="distill: softmax temperature T of the soft targets (the soft loss is "
                  "multiplied by T^2).")
    hard_weight: float = field(
        0.5, help="distill: weight of the cross-entropy with the labels (the ramp's end with "
                  "--weight_ramp_steps).")
    soft_weight: float = field(
        0.5, help="distill: weight of T^2 x KL(teacher || student) on softened outputs (the "
                  "ramp's end with --weight_ramp_steps).")
    hard_weight_start: float | None = field(
        None, help="distill: the hard weight at cycle 0, ramped linearly to --hard_weight over "
                   "--weight_ramp_steps cycles (unset: --hard_weight throughout).")
    soft_weight_start: float | None = field(
        None, help="distill: the soft weight at cycle 0, ramped linearly to --soft_weight over "
                   "--weight_ramp_steps cycles (unset: --soft_weight throughout).")
    weight_ramp_steps: int = field(
        0, help="distill: cycles over which the loss weights ramp from their _start values "
                "(0: no ramp).")

    generator: str = field(
        "", help="Your own generator: module.path:function, called with keyword arguments "
                 "latent_dim, shape and num_classes, returning a keras.Model (README \"Your own "
                 "networks\"); empty: the built-in one. Saved in LOGDIR/networks.")
    discriminator: str = field(
        "", help="Your own discriminator: module.path:function, called like --generator; empty: "
                 "the built-in one.")

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
