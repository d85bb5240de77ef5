"""A filesystem fault met while working (disk full, a path removed or made read-only under a
running job) becomes one line naming the path and what to do; any other error stays a bug."""

import errno

import tensorflow as tf

import run


def test_a_full_disk_names_the_file_and_says_to_free_space():
    error = OSError(errno.ENOSPC, "No space left on device", "/runs/a/config.json")
    assert run.filesystem_fault(error, "train") == (
        "/runs/a/config.json: No space left on device. A filesystem fault stopped --mode=train; "
        "free some disk space, then rerun (training resumes from its last checkpoint).")


def test_a_tensorflow_write_error_names_its_first_line():
    error = tf.errors.PermissionDeniedError(None, None, "runs/a/checkpoints/ckpt-4_temp; "
                                                        "Read-only file system\nmore")
    assert run.filesystem_fault(error, "train") == (
        "runs/a/checkpoints/ckpt-4_temp; Read-only file system. A filesystem fault stopped "
        "--mode=train; check that the path exists and is writable, then rerun (training "
        "resumes from its last checkpoint).")


def test_other_errors_are_not_taken_for_filesystem_faults():
    assert run.filesystem_fault(ValueError("a bug"), "train") is None
    assert run.filesystem_fault(tf.errors.InvalidArgumentError(None, None, "shape"), "train") is None
