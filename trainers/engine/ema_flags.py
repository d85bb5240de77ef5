"""The flags of the EMA generator (owner "ema", read by the setups naming it in `flag_owners`),
which the engine keeps (`engine.ema`). A module of its own, not `engine.flags`: its flags come
after the adversarial ones in Config's fields and docs/flags.md, and a module declares its
flags when it is imported (`trainers.api` imports the owners in that order).

Pure Python: flags are checked before TensorFlow is imported.
"""

from __future__ import annotations

from trainers.config.flags import Flag, declare

EMA_HALFLIFE_SCHEDULES = ("constant", "cosine")


declare(
    "ema",
    Flag('ema_halflife_kimg', float, None,
         help='Keep an EMA generator with this half-life in thousands of images (0: none); '
              '--use_ema picks it for samples, evaluations and exports (preset default: 20 for '
              'r3gan, 0 otherwise).',
         fixed_on_resume=True, preset=True, neutral=0.0),
    Flag('ema_halflife_schedule', str, None,
         help='constant: --ema_halflife_kimg throughout; cosine: the half-life rises from 0 along '
              "a half cosine to --ema_halflife_kimg at the run's end (--train_cycles or "
              '--train_time; preset default: cosine for r3gan, constant otherwise).',
         choices=EMA_HALFLIFE_SCHEDULES, preset=True, neutral='constant'),
    Flag('ema_rampup', float, 0.0,
         help='EMA ramp-up: half-life at most this fraction of the images seen (0: none).'),
    Flag('use_ema', bool, True,
         help='Sample, evaluate and export with the EMA generator when the run keeps one '
              "(--ema_halflife_kimg), also in training's sample grids and evaluations."),
)
