"""The flags of the GAN game and its networks, read by the adversarial setups and their kinds
(`kinds.GAN_FLAG_OWNERS`), not by every setup: a generator's rate, updates and width
(generator); the adversarial loss and a discriminator's rate, updates and width
(discriminator); the --arch networks drawn from noise (architecture) and the --arch
discriminator's options (discriminator architecture); the penalties, clipping, augmentation,
update order, packing and top-k (adversarial).

Declared when imported (`trainers.config.flags.declare`); `trainers.api` imports every owner's
flags module in the order Config's fields and docs/flags.md list them. Pure Python (no
TensorFlow, no setup module): flags are checked before TensorFlow is imported.
"""

from __future__ import annotations

from gan import architecture_names
from trainers.config.choices import LEARNING_RATE_SCHEDULES
from trainers.config.flags import REQUIRED, Flag, declare

LOSSES = ("minimax", "non_saturating", "wasserstein", "hinge", "least_squares", "relativistic")
PENALTIES = ("none", "gradient_penalty", "one_sided_gradient_penalty", "dragan", "r1", "r2", "r1_r2")
NORMALIZATIONS = ("none", "batch", "layer")
UPSAMPLINGS = ("transposed", "nearest", "bilinear")
ARCHS = architecture_names.NAMES
UPDATE_ORDERS = ("alternating", "simultaneous")


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
         help='Image networks: dcgan (strided convolutions, Radford et al.); resnet (the residual'
              ' generator and discriminator of SN-GAN and BigGAN; --d_spectral_norm applies, the '
              'DCGAN-only flags --g_extra_blocks, --g_upsample, --d_extra_blocks, --d_dropout and '
              '--d_normalization do not); or r3gan (the inverted-bottleneck residual networks of '
              'R3GAN, Huang et al. 2024, without normalization: --r3gan_* apply, the DCGAN-only '
              'flags and --d_spectral_norm do not).',
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
    Flag('r3gan_blocks', int, 2,
         help='--arch=r3gan: residual blocks per stage (one stage per side, from 4 or 7 up to '
              '--resolution) in the generator and the discriminator.',
         fixed_on_resume=True),
    Flag('r3gan_expansion', int, 2,
         help="--arch=r3gan: how many times a block's channels its grouped 3x3 convolution has "
              '(the inverted bottleneck).',
         fixed_on_resume=True),
    Flag('r3gan_group_width', int, 16,
         help="--arch=r3gan: channels per group of each block's grouped 3x3 convolution (R3GAN's "
              '16; the group count is the expanded channels over it); must divide '
              '--r3gan_expansion x --g_width and x --d_width.',
         fixed_on_resume=True),
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
    Flag('penalty_final_factor', float, None,
         help='The penalty weight moves along a half cosine from --penalty_weight to this multiple '
              "of it at the run's end (--train_cycles or --train_time; 1: constant; preset "
              'default: 0.1 for r3gan, 1 otherwise).',
         preset=True, neutral=1.0),
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
