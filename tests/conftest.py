"""Test-session set-up shared by every test module.

The CPU is split into two logical devices before TensorFlow initialises, so mirrored
(multi-replica) training is tested on a CPU-only machine; one-replica strategies use the first.
Op determinism makes resume and replica-equivalence comparisons exact.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# Tests never reach the network: no dataset download is attempted or probed.
os.environ["GANTRY_OFFLINE"] = "1"

import tensorflow as tf  # noqa: E402

from trainers.engine.distribution import configure_cpu_replicas  # noqa: E402

configure_cpu_replicas(2)
tf.config.experimental.enable_op_determinism()
