"""The flags of evaluation: when and on how much a run is evaluated, and the domain evaluator's
training (owner "evaluation", read by every setup); the features image metrics are computed on
(owner "features", read by the image setups naming it in `flag_owners`).

Declared when imported (`trainers.config.flags.declare`); `trainers.api` imports every owner's
flags module in the order Config's fields and docs/flags.md list them. Pure Python: flags are
checked before TensorFlow is imported.
"""

from __future__ import annotations

from trainers.config.flags import DIRECTORY, FILE, Flag, declare


declare(
    "evaluation",
    Flag('eval_every', int, 0,
         help='Evaluate (FID, KID, precision/recall; toys: modes and high-quality samples) every N '
              'cycles and keep the best checkpoint by FID (toys: by modes and high-quality samples)'
              ' in LOGDIR/checkpoints_best (0: never).'),
    Flag('eval_samples', int, 2000,
         help='Generated (and real test) images per evaluation (toys: a fixed number of points).'),
    Flag('mode_samples', int, 26_000,
         help='--dataset=stacked_fashion_mnist: generated images whose modes (class triples by '
              'the domain evaluator) --eval_every and --mode=eval count: modes_domain, '
              'modes_kl_domain.'),
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
         help="The network image metrics are computed on, which every metric key names: domain "
              "(Gantry's classifier of the dataset, --mode=train_evaluator), inception (the "
              "standard FID Inception graph of published FIDs, --inception_graph), "
              "keras_inception_v3 (Keras's ImageNet InceptionV3, --keras_inception_weights; not "
              "comparable with published FIDs), or a .keras/.h5 model path (keys say custom)."),
    Flag('inception_graph', str, '',
         help='--evaluator=inception: the standard graph, classify_image_graph_def.pb or the '
              'inception-2015-12-05.tgz holding it, checked by its SHA-256 (empty: the copy in '
              '$XDG_CACHE_HOME/gantry/inception, else ~/.cache/gantry/inception, downloaded '
              'there once).',
         path=FILE),
    Flag('keras_inception_weights', str, 'imagenet',
         help="--evaluator=keras_inception_v3: its weights .h5 file, or imagenet for Keras's "
              "cache (never downloaded).",
         renamed_from=('inception_weights',)),
)
