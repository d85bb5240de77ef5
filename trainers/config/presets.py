"""`--gan` presets: the hyper-parameters a setup chooses unless a flag overrides them.

A preset is resolved once, when a run starts; a resumed run keeps the values it started with
(its `config.json`), so a later retune of a preset never changes a run in progress.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from trainers.config.fields import Config, ConfigError


@dataclasses.dataclass(frozen=True)
class Preset:
    """The hyper-parameters a `--gan` preset sets; each can be overridden by its own flag."""

    loss: str
    optimizer: str
    g_lr: float
    d_lr: float
    beta1: float
    beta2: float
    d_steps: int
    g_steps: int = 1
    penalty: str = "none"
    penalty_weight: float = 0.0
    clip_value: float = 0.0
    d_normalization: str = "none"
    penalty_every: int = 1
    d_spectral_norm: bool = False
    batch_size: int = 64
    topk: float = 1.0
    topk_decay_steps: int = 0


PRESETS: dict[str, Preset] = {
    # Radford et al. 2016 with the non-saturating loss; Adam 2e-4, beta1 0.5. Tuned for sample
    # quality at equal wall clock on Fashion-MNIST (BUILD.md, "The dcgan preset tuned"): batch
    # 32, not the paper's 128 (twice the updates per image); the generator at four times D's
    # rate (8e-4); top-k generator training keeping half the fakes after 5,000 cycles.
    "dcgan": Preset(loss="non_saturating", optimizer="adam", g_lr=8e-4, d_lr=2e-4,
                    beta1=0.5, beta2=0.999, d_steps=1, batch_size=32, topk=0.5,
                    topk_decay_steps=5000),
    # Arjovsky et al. 2017: weight clipping 0.01, RMSprop 5e-5, n_critic 5.
    "wgan": Preset(loss="wasserstein", optimizer="rmsprop", g_lr=5e-5, d_lr=5e-5,
                   beta1=0.0, beta2=0.0, d_steps=5, clip_value=0.01),
    # Gulrajani et al. 2017: penalty 10, Adam 1e-4 betas (0, 0.9), n_critic 5, no batch norm.
    "wgan_gp": Preset(loss="wasserstein", optimizer="adam", g_lr=1e-4, d_lr=1e-4,
                      beta1=0.0, beta2=0.9, d_steps=5, penalty="gradient_penalty",
                      penalty_weight=10.0),
    # Mao et al. 2017: least-squares loss (a=0, b=c=1), Adam 2e-4, beta1 0.5.
    "lsgan": Preset(loss="least_squares", optimizer="adam", g_lr=2e-4, d_lr=2e-4,
                    beta1=0.5, beta2=0.999, d_steps=1),
    # Miyato et al. 2018: hinge loss, spectral norm in D (no batch norm), Adam 2e-4 (0.5, 0.999),
    # n_dis 1 -- their best setting for the standard CNN.
    "sngan": Preset(loss="hinge", optimizer="adam", g_lr=2e-4, d_lr=2e-4, beta1=0.5,
                    beta2=0.999, d_steps=1, d_spectral_norm=True),
    # Mescheder et al. 2018 / StyleGAN2: non-saturating loss, R1 on real data with gamma 10
    # (weight gamma/2 = 5), evaluated lazily every 16 cycles.
    "r1": Preset(loss="non_saturating", optimizer="adam", g_lr=2e-4, d_lr=2e-4, beta1=0.5,
                 beta2=0.999, d_steps=1, penalty="r1", penalty_weight=5.0, penalty_every=16),
    # Miyato & Koyama 2018: projection discriminator with spectral norm, conditional batch norm
    # in the generator, hinge loss, Adam 2e-4.
    "cgan": Preset(loss="hinge", optimizer="adam", g_lr=2e-4, d_lr=2e-4, beta1=0.5,
                   beta2=0.999, d_steps=1, d_spectral_norm=True),
    # Odena et al. 2017: non-saturating loss plus an auxiliary classifier on D, Adam 2e-4, 0.5.
    "acgan": Preset(loss="non_saturating", optimizer="adam", g_lr=2e-4, d_lr=2e-4, beta1=0.5,
                    beta2=0.999, d_steps=1),
    # Zhu et al. 2017: least-squares loss, Adam 2e-4 beta1 0.5, cycle weight 10, identity 5.
    "cyclegan": Preset(loss="least_squares", optimizer="adam", g_lr=2e-4, d_lr=2e-4, beta1=0.5,
                       beta2=0.999, d_steps=1),
}

PRESET_FIELDS = tuple(f.name for f in dataclasses.fields(Preset))
# A preset field a run's config.json lacks was added after the run started; these defaults leave
# its behaviour unchanged (one generator step, no penalty, no top-k...).
_NEUTRAL_PRESET_VALUES = {f.name: f.default for f in dataclasses.fields(Preset)
                          if f.default is not dataclasses.MISSING}


def resolve_preset(config: Config, recorded: Mapping[str, Any] | None = None) -> Config:
    """Fills every preset field the user left unset from the `--gan` preset.

    `recorded` is the config.json of the run being resumed (`read_run_record`). A preset is
    resolved once, when a run starts: a resumed run of the same `--gan` takes the unset fields
    from its record, so it continues with the rates and schedule it started with even when
    Gantry's preset has changed since. A field the record lacks did not exist when the run
    started and takes the value that leaves behaviour unchanged. Flags given explicitly win.
    """
    if config.gan not in PRESETS:
        raise ConfigError(
            f"--gan={config.gan!r} is not a known preset; choose one of {', '.join(PRESETS)}.")
    preset = PRESETS[config.gan]
    resuming = recorded is not None and recorded.get("gan") == config.gan
    filled = {name: recorded_value(recorded, name, getattr(preset, name)) if resuming
              else getattr(preset, name)
              for name in PRESET_FIELDS if getattr(config, name) is None}
    return dataclasses.replace(config, **filled)


def recorded_value(recorded: Mapping[str, Any], name: str, default: Any = None) -> Any:
    """Flag `name` of a run's config.json. A flag the record lacks did not exist when the run
    started: it takes the value that leaves behaviour unchanged (a preset field's neutral
    value, else the `Config` default), or `default` when there is none."""
    if name in recorded:
        return recorded[name]
    neutral = _NEUTRAL_PRESET_VALUES.get(name, getattr(Config, name, None))
    return default if neutral is None else neutral
