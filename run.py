"""Gantry's command line: `python run.py [--flag=value ...]` or `--flagfile=FILE`.

Flags become a typed `Config`, which is resolved against the `--gan` preset and validated
before TensorFlow builds anything; then the chosen mode runs. Plain `python run.py` trains a
DCGAN on Fashion-MNIST in `runs/default` and resumes there when rerun.
"""

from __future__ import annotations

import dataclasses
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app, flags, logging  # noqa: E402

from datasets.errors import DatasetError  # noqa: E402
from trainers.config.fields import CHECKPOINT_CHOICES, Config, ConfigError, LEARNING_RATE_SCHEDULES, LOSSES, MODES, NAN_POLICIES, NORMALIZATIONS, OPTIMIZERS, PENALTIES, PRECISIONS, STRATEGIES
from trainers.config.presets import PRESETS, resolve_preset
from trainers.config.record import read_run_record
from trainers.config.validation import validate
from trainers.config.fields import DIRECTIONS, EXPORT_FORMATS, QUANTIZATIONS, UPDATE_ORDERS, UPSAMPLINGS

_DEFAULTS = Config()
_HELP = {
    "mode": "What to do: train a model; sample from, or export, the latest checkpoint in "
            "--logdir; or plot its training curves.",
    "gan": "Preset: sets loss, optimizer, learning rates, betas, batch size, d_steps, penalty, "
           "clipping.",
    "dataset": "fashion_mnist, ring8, grid25, or tfds:<name> (any TFDS image dataset).",
    "data_dir": "TFDS data directory (prepared data is reused; downloads go here).",
    "fashion_mnist_dir": "Folder with the four Fashion-MNIST IDX .gz files "
                         "(default /usr/share/datasets/fashion-mnist).",
    "resolution": "Image side in pixels (28, 32 or 64); default: the dataset's own.",
    "batch_size": "Global batch size, split over replicas (preset default).",
    "train_steps": "Training cycles; each cycle is d_steps discriminator + g_steps generator updates.",
    "steps_per_loop": "Cycles run inside one compiled call.",
    "strategy": "Distribution strategy.",
    "cpu_replicas": "Split the CPU into this many logical devices (mirrored training without GPUs).",
    "logdir": "Run directory: TensorBoard events, checkpoints, config.json. Rerun to resume.",
    "image_every": "Write a sample grid every N cycles (0: never).",
    "histogram_every": "Write weight and gradient histograms every N cycles (0: never).",
    "checkpoint_every": "Save a checkpoint every N cycles (0: only at the end).",
    "keep_checkpoints": "How many recent checkpoints to keep.",
    "seed": "Seed for data order, noise and sampling.",
    "latent_dim": "Size of the generator's noise vector.",
    "g_width": "Base channel width of the generator.",
    "d_width": "Base channel width of the discriminator.",
    "g_extra_blocks": "3x3 stride-1 convolution blocks added to the generator at each "
                      "resolution (0: the DCGAN generator).",
    "g_upsample": "How the generator doubles its side: transposed (4x4 stride-2 transposed "
                  "convolutions, DCGAN), nearest or bilinear (resize, then a 3x3 convolution, "
                  "as in SN-GAN's and BigGAN's ResNets; ~2x the generator's compute at 28 px).",
    "d_extra_blocks": "3x3 stride-1 convolution blocks added to the discriminator after each "
                      "stride-2 convolution (0: the DCGAN discriminator).",
    "d_dropout": "Dropout rate after each discriminator activation, in training only (0: off; "
                 "the TensorFlow DCGAN tutorial uses 0.3).",
    "shuffle_buffer": "Shuffle buffer size (examples).",
    "num_samples": "--mode=sample: how many samples to draw (with --interpolate: how many rows).",
    "output": "--mode=sample: .png (grid) or .npy (uint8 NHWC) file to write; --mode=plot: the "
              ".png (default LOGDIR/curves.png).",
    "loss": "Adversarial loss (preset default).",
    "optimizer": "Optimizer for both models (preset default).",
    "g_lr": "Generator learning rate (preset default).",
    "d_lr": "Discriminator learning rate (preset default).",
    "beta1": "Adam beta_1 (preset default).",
    "beta2": "Adam beta_2 (preset default).",
    "d_steps": "k: discriminator updates per cycle (preset default).",
    "g_steps": "Generator updates per cycle (preset default).",
    "penalty": "Discriminator regulariser (preset default).",
    "penalty_weight": "Weight of the penalty (preset default).",
    "clip_value": "WGAN weight clipping bound, 0 for none (preset default).",
    "d_normalization": "Normalization in the discriminator (preset default).",
    "eval_every": "Evaluate (FID, KID, precision/recall, ...) every N cycles and keep the best "
                  "checkpoint by FID (toys: modes and high-quality samples) in "
                  "LOGDIR/checkpoints_best (0: never).",
    "eval_samples": "Generated (and real test) samples per evaluation.",
    "evaluator": "Feature extractor: domain (Gantry's classifier, --mode=train_evaluator), "
                 "inception (--inception_weights), or a .keras/.h5 model path.",
    "evaluator_dir": "Cache folder of trained domain evaluators (default ~/.cache/gantry/evaluators).",
    "inception_weights": "InceptionV3 weights .h5 file, or imagenet for Keras's cache (never "
                         "downloaded).",
    "checkpoint": "Which checkpoint --mode=sample/eval/export use: latest, or best (by FID; "
                  "toys: by modes and high-quality samples).",
    "evaluator_epochs": "--mode=train_evaluator: training epochs of the domain classifier.",
    "evaluator_train_examples": "--mode=train_evaluator: use only this many training examples "
                                "(0: all).",
    "real_vs_real": "--mode=eval: metrics of the train split against the test split (the floor).",
    "penalty_every": "Lazy regularization: apply the penalty every N cycles with weight x N "
                     "(preset default; 1 = in every discriminator update).",
    "d_spectral_norm": "Spectral normalization of every discriminator layer (preset default).",
    "diffaugment": "DiffAugment policy for discriminator inputs, e.g. color,translation,cutout "
                   "(empty: none).",
    "consistency_weight": "Consistency regularization (bCR) weight on real images (0: off).",
    "ema_halflife_kimg": "Keep an EMA generator with this half-life in thousands of images "
                         "(0: none). Samples use it when --use_ema.",
    "ema_rampup": "EMA ramp-up: half-life at most this fraction of the images seen (0: none).",
    "use_ema": "Sample from the EMA generator when the run keeps one.",
    "g_clip_global_norm": "Clip the generator's gradient to this global norm (0: off).",
    "d_clip_global_norm": "Clip the discriminator's gradient to this global norm (0: off).",
    "precision": "float32, or mixed precision (outputs and losses stay float32).",
    "g_lr_schedule": "Generator learning-rate schedule over --train_steps.",
    "d_lr_schedule": "Discriminator learning-rate schedule over --train_steps.",
    "lr_warmup_steps": "Linear learning-rate warm-up over this many cycles (0: none).",
    "penalty_ramp_steps": "Ramp the penalty weight from 0 to --penalty_weight over this many cycles.",
    "nan_policy": "On a NaN/Inf loss or gradient: stop, or roll back to the last checkpoint.",
    "nan_lr_factor": "With --nan_policy=rollback, multiply every learning rate by this.",
    "max_rollbacks": "With --nan_policy=rollback, stop after this many rollbacks.",
    "deterministic": "Deterministic ops (bit-identical reruns and resumes on CPU; slower on GPU).",
    "jit_compile": "Compile each update's forward and backward passes with XLA (one replica for "
                   "image GANs). XLA draws different noise for the same seed: keep it fixed "
                   "across resumes.",
    "grid": "--mode=sample: draw ROWSxCOLUMNS samples as a grid, e.g. 8x8.",
    "interpolate": "--mode=sample: rows of this many images, each a slerp between two noise "
                   "vectors (ends included); --num_samples rows (0: off).",
    "truncation": "--mode=sample: redraw noise values with |z| above this threshold (0: off).",
    "export_dir": "--mode=export: where exports go (default LOGDIR/export); writes "
                  "EXPORT_DIR/NAME/VERSION.",
    "export_name": "--mode=export: the model's name, a directory under --export_dir.",
    "export_version": "--mode=export: numeric version directory (default: the checkpoint's step).",
    "export_format": "--mode=export: a SavedModel, or a SavedModel plus model.tflite.",
    "quantize": "--export_format=tflite: weight quantization of model.tflite.",
    "update_order": "alternating: discriminator then generator updates, each with its own "
                    "forward pass; simultaneous (k=1): both updates from one shared forward pass "
                    "(the TensorFlow DCGAN tutorial's faster, slightly different algorithm).",
    "label": "Conditional --gan (cgan, acgan): --mode=sample draws only this class (index or "
             "name, e.g. 7 or Sneaker); empty: one row per class.",
    "aux_weight": "acgan: weight of the auxiliary classification losses.",
    "domain_a": "cyclegan: domain A as DATASET[:CLASS[,CLASS...]] (e.g. fashion_mnist:Sneaker) "
                "or a TFDS cycle_gan domain (e.g. tfds:cycle_gan/horse2zebra:A, splits "
                "trainA/testA; needs --resolution).",
    "domain_b": "cyclegan: domain B, same form as --domain_a.",
    "cycle_weight": "cyclegan: weight of the cycle-consistency (L1) losses.",
    "pack": "PacGAN packing: the discriminator judges this many samples at once (stacked "
            "along features or channels), which penalises mode collapse (1: off).",
    "identity_weight": "cyclegan: weight of the identity (L1) losses (paper: half the cycle "
                       "weight; 0: off).",
    "direction": "cyclegan --mode=sample: translate test images of domain A to B (ab) or of "
                 "B to A (ba).",
    "topk": "Top-k generator training (Sinha et al. 2020): each generator update learns only "
            "from this fraction of its fakes, those the discriminator scores as most real "
            "(1: off; paper: 0.5-0.75; preset default: 0.5 for dcgan, 1 otherwise).",
    "topk_decay_steps": "Lower the kept fraction from 1 to --topk linearly over this many "
                        "cycles (0: --topk from the start; preset default: 5000 for dcgan).",
}
_ENUMS = {"mode": MODES, "gan": tuple(PRESETS), "strategy": STRATEGIES, "loss": LOSSES,
          "optimizer": OPTIMIZERS, "penalty": PENALTIES, "d_normalization": NORMALIZATIONS,
          "precision": PRECISIONS, "g_lr_schedule": LEARNING_RATE_SCHEDULES,
          "d_lr_schedule": LEARNING_RATE_SCHEDULES, "nan_policy": NAN_POLICIES,
          "export_format": EXPORT_FORMATS, "quantize": QUANTIZATIONS,
          "update_order": UPDATE_ORDERS, "direction": DIRECTIONS, "g_upsample": UPSAMPLINGS}
_INTS = {f.name for f in dataclasses.fields(Config) if f.type in ("int", "int | None")}
_FLOATS = {f.name for f in dataclasses.fields(Config) if f.type in ("float", "float | None")}


def _define_flags() -> None:
    """One absl flag per Config field; enums are checked by `validate` for uniform messages."""
    for field in dataclasses.fields(Config):
        default = getattr(_DEFAULTS, field.name)
        help_text = _HELP[field.name]
        if field.name in _ENUMS:
            help_text += f" One of: {', '.join(_ENUMS[field.name])}."
        if field.type in ("bool", "bool | None"):
            flags.DEFINE_boolean(field.name, default, help_text)
        elif field.name in _INTS:
            flags.DEFINE_integer(field.name, default, help_text)
        elif field.name in _FLOATS:
            flags.DEFINE_float(field.name, default, help_text)
        else:
            flags.DEFINE_string(field.name, default, help_text)


_define_flags()
FLAGS = flags.FLAGS


def config_from_flags() -> Config:
    """The resolved, validated config of the parsed flags."""
    values = {field.name: FLAGS[field.name].value for field in dataclasses.fields(Config)}
    config = Config(**values)
    # A resumed training run keeps the preset values it started with (config.json).
    recorded = read_run_record(config.logdir) if config.mode == "train" else None
    return validate(resolve_preset(config, recorded))


def main(argv: list[str]) -> int:
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments {argv[1:]}; every option is a --flag.")
    try:
        config = config_from_flags()
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    from trainers.engine.distribution import configure_cpu_replicas, make_strategy
    from trainers.engine.preemption import RESTART_EXIT_CODE, Preempted
    try:
        configure_cpu_replicas(config.cpu_replicas)
        if config.deterministic:
            import tensorflow as tf
            tf.config.experimental.enable_op_determinism()
        if config.mode == "sample":
            from trainers.sampling import sample
            sampled = sample(config)
            print(f"Wrote {sampled.count} samples from {sampled.checkpoint} to {config.output}")
        elif config.mode == "export":
            from trainers.export import export
            exported = export(config)
            sizes = ", ".join(f"{name} {size / 1024:.1f} KiB" for name, size in exported.sizes.items())
            print(f"Exported {exported.generator} of {exported.checkpoint} (step {exported.step}) "
                  f"to {exported.path} ({sizes})")
        elif config.mode == "eval":
            import json
            from trainers.evaluation import evaluate
            print(json.dumps(evaluate(config), sort_keys=True))
        elif config.mode == "train_evaluator":
            from trainers.evaluation import train_domain_evaluator
            loaded = train_domain_evaluator(config)
            print(f"Trained the {config.dataset} evaluator: test accuracy "
                  f"{loaded.record['test_accuracy']:.4f}, saved in {loaded.directory}")
        elif config.mode == "plot":
            from trainers.plotting import plot
            print(f"Wrote the training curves of {config.logdir} to {plot(config)}")
        else:
            # Created before any other TF op: MultiWorkerMirroredStrategy requires it.
            strategy = make_strategy(config.strategy, cpu_replicas=config.cpu_replicas)
            from trainers.training import train
            train(config, strategy=strategy)
    except (ConfigError, DatasetError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except Preempted as stop:
        print(stop, file=sys.stderr, flush=True)
        return RESTART_EXIT_CODE
    return 0


if __name__ == "__main__":
    logging.set_verbosity(logging.WARNING)
    app.run(lambda argv: sys.exit(main(argv)))
