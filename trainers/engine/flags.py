"""The flags of how a run trains (owner "training", read by every setup), which the engine reads:
its length in cycles or time, the loop, the strategy and replicas, checkpoints, the optimizer,
precision, learning-rate warm-up, hold and multipliers, NaN handling, determinism and XLA.

Declared when imported (`trainers.config.flags.declare`); `trainers.api` imports every owner's
flags module in the order Config's fields and docs/flags.md list them. Pure Python: flags are
checked before TensorFlow is imported.
"""

from __future__ import annotations

from trainers.config.flags import DIRECTORY, REQUIRED, Flag, declare

STRATEGIES = ("auto", "default", "one_device", "mirrored", "multi_worker")
OPTIMIZERS = ("adam", "rmsprop")
DTYPE_POLICIES = ("float32", "mixed_bfloat16", "mixed_float16")  # what Keras takes
PRECISIONS = (*DTYPE_POLICIES, "auto")
NAN_POLICIES = ("stop", "rollback")


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
    Flag('beta2_final', float, None,
         help="Adam beta_2 at the run's end: it moves from --beta2 along a half cosine to this at "
              '--train_cycles or at the end of --train_time, whichever comes first (0: --beta2 '
              'throughout; preset default: 0.99 for r3gan, 0 otherwise).',
         preset=True, neutral=0.0),
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
