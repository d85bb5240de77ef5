"""Comparisons of checkpoint files written by the end-to-end tests."""

import numpy as np
import tensorflow as tf


def assert_same_checkpoints(a, b):
    """Checkpoints `a` and `b` hold bit-identical model and optimizer variables."""
    names = [name for name, _ in tf.train.list_variables(a) if name.startswith(("models/", "optimizers/"))]
    assert len(names) > 20
    for name in names:
        np.testing.assert_array_equal(tf.train.load_variable(a, name), tf.train.load_variable(b, name), err_msg=name)
