"""The typed configuration of a run: every flag is one field of `Config`.

This module imports no TensorFlow, so flags are checked instantly; `run.py` defines one absl
flag per field.
"""

from __future__ import annotations

import dataclasses
from typing import Any

MODES = ("train", "sample", "export", "plot", "eval", "train_evaluator")
CHECKPOINT_CHOICES = ("latest", "best")
STRATEGIES = ("auto", "default", "one_device", "mirrored", "multi_worker")
OPTIMIZERS = ("adam", "rmsprop")
LOSSES = ("minimax", "non_saturating", "wasserstein", "hinge", "least_squares")
PENALTIES = ("none", "gradient_penalty", "dragan", "r1", "r2")
NORMALIZATIONS = ("none", "batch", "layer")
UPSAMPLINGS = ("transposed", "nearest", "bilinear")
PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16")
LEARNING_RATE_SCHEDULES = ("constant", "linear", "cosine")
NAN_POLICIES = ("stop", "rollback")
EXPORT_FORMATS = ("saved_model", "tflite")
QUANTIZATIONS = ("none", "float16", "dynamic_int8")
UPDATE_ORDERS = ("alternating", "simultaneous")
DIRECTIONS = ("ab", "ba")


class ConfigError(ValueError):
    """A flag has a bad value; the message says which, why and how to fix it."""


@dataclasses.dataclass(frozen=True)
class Config:
    """Every knob of a run. Preset fields are None until `resolve_preset` fills them."""

    mode: str = "train"
    gan: str = "dcgan"
    dataset: str = "fashion_mnist"
    data_dir: str | None = None
    fashion_mnist_dir: str | None = None
    resolution: int | None = None
    batch_size: int | None = None
    train_steps: int = 6000
    steps_per_loop: int = 50
    strategy: str = "auto"
    cpu_replicas: int = 1
    logdir: str = "runs/default"
    image_every: int = 500
    histogram_every: int = 1000
    checkpoint_every: int = 500
    keep_checkpoints: int = 3
    seed: int = 0
    latent_dim: int = 100
    g_width: int = 64
    d_width: int = 64
    g_extra_blocks: int = 0
    g_upsample: str = "transposed"
    d_extra_blocks: int = 0
    d_dropout: float = 0.0
    shuffle_buffer: int = 10_000
    num_samples: int = 64
    output: str = "samples.png"
    loss: str | None = None
    optimizer: str | None = None
    g_lr: float | None = None
    d_lr: float | None = None
    beta1: float | None = None
    beta2: float | None = None
    d_steps: int | None = None
    g_steps: int | None = None
    penalty: str | None = None
    penalty_weight: float | None = None
    clip_value: float | None = None
    d_normalization: str | None = None
    penalty_every: int | None = None
    d_spectral_norm: bool | None = None
    diffaugment: str = ""
    consistency_weight: float = 0.0
    eval_every: int = 0
    eval_samples: int = 2000
    evaluator: str = "domain"
    evaluator_dir: str | None = None
    inception_weights: str = "imagenet"
    checkpoint: str = "latest"
    real_vs_real: bool = False
    evaluator_epochs: int = 3
    evaluator_train_examples: int = 0
    ema_halflife_kimg: float = 0.0
    ema_rampup: float = 0.0
    use_ema: bool = True
    g_clip_global_norm: float = 0.0
    d_clip_global_norm: float = 0.0
    precision: str = "float32"
    g_lr_schedule: str = "constant"
    d_lr_schedule: str = "constant"
    lr_warmup_steps: int = 0
    penalty_ramp_steps: int = 0
    nan_policy: str = "stop"
    nan_lr_factor: float = 0.5
    max_rollbacks: int = 3
    deterministic: bool = False
    jit_compile: bool = False
    grid: str = ""
    interpolate: int = 0
    truncation: float = 0.0
    export_dir: str | None = None
    export_name: str = "generator"
    export_version: int | None = None
    export_format: str = "saved_model"
    quantize: str = "none"
    update_order: str = "alternating"
    label: str = ""
    aux_weight: float = 1.0
    domain_a: str = ""
    domain_b: str = ""
    cycle_weight: float = 10.0
    identity_weight: float = 5.0
    pack: int = 1
    direction: str = "ab"
    topk: float | None = None
    topk_decay_steps: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
