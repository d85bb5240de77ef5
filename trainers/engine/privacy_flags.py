"""The flags of differential privacy (owner "privacy", read by the setups naming it in
`flag_owners`): DP-SGD on the discriminator phase, clipped and noised by the engine
(`engine.phases`) and accounted by `engine.privacy`. A module of its own, not `engine.flags`:
its flags come after the adversarial ones in Config's fields and docs/flags.md, and a module
declares its flags when it is imported (`trainers.api` imports the owners in that order).

Pure Python: flags are checked before TensorFlow is imported.
"""

from __future__ import annotations

from trainers.config.flags import Flag, declare


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
