"""The flags of what a run writes while it trains (owner "outputs", read by every setup): sample
grids, histograms and TensorFlow's own log lines.

Declared when imported (`trainers.config.flags.declare`); `trainers.api` imports every owner's
flags module in the order Config's fields and docs/flags.md list them. Pure Python: flags are
checked before TensorFlow is imported.
"""

from __future__ import annotations

from trainers.config.flags import Flag, declare


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
