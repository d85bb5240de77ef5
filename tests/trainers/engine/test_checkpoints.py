"""Damaged checkpoints are found by reading them back, passed over for the newest intact one,
and moved aside only when allowed; a checkpoint whose save was cut short is never used."""

import os

import numpy as np
import pytest
import tensorflow as tf

from trainers.config.flags import ConfigError
from trainers.engine.checkpoints import (CORRUPT_SUBDIR, RunCheckpoints, newest_intact,
                                         unreadable_reason)

SIZE = 4096


def saved_run(directory, steps=(2, 4, 6)):
    """A RunCheckpoints in `directory` with one checkpoint per step; the variable holds the step."""
    variable = tf.Variable(np.zeros(SIZE, np.float32))
    manager = RunCheckpoints(tf.train.Checkpoint(v=variable), str(directory), max_to_keep=5)
    for step in steps:
        variable.assign(np.full(SIZE, step, np.float32))
        manager.save(checkpoint_number=step)
    return variable, manager


def data_file(directory, step):
    return os.path.join(directory, f"ckpt-{step}.data-00000-of-00001")


def truncate(directory, step):
    os.truncate(data_file(directory, step), 100)


def overwrite_bytes(directory, step):
    with open(data_file(directory, step), "r+b") as file:
        file.seek(SIZE)
        file.write(b"\x07" * 64)


def test_an_intact_checkpoint_has_no_reason(tmp_path):
    _, manager = saved_run(tmp_path, steps=(1,))
    assert unreadable_reason(manager.latest_checkpoint) is None


@pytest.mark.parametrize("damage, reason", [(truncate, "IndexError: Read less bytes"),
                                            (overwrite_bytes, "Checksum does not match")])
def test_a_damaged_newest_checkpoint_is_moved_aside_and_the_previous_one_restored(
        tmp_path, damage, reason):
    variable, manager = saved_run(tmp_path)
    damage(tmp_path, 6)
    variable.assign(np.zeros(SIZE, np.float32))
    restored, unreadable = manager.restore_latest(may_move=True)
    assert restored == str(tmp_path / "ckpt-4") and variable.numpy()[0] == 4
    [entry] = unreadable
    assert entry.path == str(tmp_path / "ckpt-6") and reason in entry.reason
    assert entry.moved_to == str(tmp_path / CORRUPT_SUBDIR / "ckpt-6")
    assert sorted(os.listdir(tmp_path / CORRUPT_SUBDIR)) == [
        "ckpt-6.data-00000-of-00001", "ckpt-6.index"]
    # The listing no longer names it, for readers and for the manager's next saves.
    assert tf.train.latest_checkpoint(str(tmp_path)) == str(tmp_path / "ckpt-4")
    assert manager.save(checkpoint_number=6) == str(tmp_path / "ckpt-6")
    assert manager.checkpoints == [str(tmp_path / f"ckpt-{step}") for step in (2, 4, 6)]


def test_without_leave_to_move_a_damaged_checkpoint_stays_in_place(tmp_path):
    variable, manager = saved_run(tmp_path)
    truncate(tmp_path, 6)
    restored, [entry] = manager.restore_latest(may_move=False)
    assert restored == str(tmp_path / "ckpt-4") and variable.numpy()[0] == 4
    assert entry.moved_to is None and "left in place" in entry.describe()
    assert not os.path.exists(tmp_path / CORRUPT_SUBDIR)
    assert tf.train.latest_checkpoint(str(tmp_path)) == str(tmp_path / "ckpt-6")


def test_a_second_fault_at_the_same_step_keeps_both_copies(tmp_path):
    _, manager = saved_run(tmp_path)
    for _ in range(2):
        truncate(tmp_path, 6)
        manager.restore_latest(may_move=True)
        manager.save(checkpoint_number=6)
    assert sorted(os.listdir(tmp_path / CORRUPT_SUBDIR)) == [
        "ckpt-6.2.data-00000-of-00001", "ckpt-6.2.index",
        "ckpt-6.data-00000-of-00001", "ckpt-6.index"]


def test_when_no_checkpoint_is_intact_the_error_lists_them_and_nothing_moves(tmp_path):
    _, manager = saved_run(tmp_path, steps=(2, 4))
    truncate(tmp_path, 2)
    truncate(tmp_path, 4)
    with pytest.raises(ConfigError) as raised:
        manager.restore_latest(may_move=True)
    message = str(raised.value)
    assert message.startswith(f"None of the 2 checkpoints in {tmp_path} can be read")
    assert f"{tmp_path}/ckpt-4: IndexError" in message and f"{tmp_path}/ckpt-2: IndexError" in message
    assert f"move {tmp_path} away to train again from step 0" in message
    assert not os.path.exists(tmp_path / CORRUPT_SUBDIR)


def test_a_save_cut_short_is_never_taken_and_its_leftovers_are_removed(tmp_path):
    variable, manager = saved_run(tmp_path, steps=(2,))
    # What a process killed during the save of step 4 leaves: shards in ckpt-4_temp/, and
    # possibly merged files, but no listing entry (TensorFlow writes the listing last).
    os.makedirs(tmp_path / "ckpt-4_temp")
    (tmp_path / "ckpt-4_temp" / "part-00000-of-00001.data-00000-of-00001").write_bytes(b"x")
    for name in os.listdir(tmp_path):
        if name.startswith("ckpt-2."):
            (tmp_path / name.replace("ckpt-2", "ckpt-4")).write_bytes((tmp_path / name).read_bytes()[:50])
    assert newest_intact(str(tmp_path), may_move=False) == (str(tmp_path / "ckpt-2"), [])
    restored, unreadable = manager.restore_latest(may_move=True)
    assert (restored, unreadable) == (str(tmp_path / "ckpt-2"), []) and variable.numpy()[0] == 2
    assert not os.path.exists(tmp_path / "ckpt-4_temp")


def test_an_empty_directory_has_no_checkpoint(tmp_path):
    assert newest_intact(str(tmp_path / "none"), may_move=True) == (None, [])


def test_a_damaged_listing_is_rebuilt_from_the_checkpoint_files(tmp_path):
    variable, manager = saved_run(tmp_path)
    (tmp_path / "checkpoint").write_text("garbage ::: {")
    truncate(tmp_path, 6)
    restored, [entry] = manager.restore_latest(may_move=True)
    assert restored == str(tmp_path / "ckpt-4") and variable.numpy()[0] == 4
    assert entry.path == str(tmp_path / "ckpt-6")
    assert manager.checkpoints == [str(tmp_path / "ckpt-2"), str(tmp_path / "ckpt-4")]
    assert manager.save(checkpoint_number=6) == str(tmp_path / "ckpt-6")
    assert tf.train.latest_checkpoint(str(tmp_path)) == str(tmp_path / "ckpt-6")


def test_without_a_listing_the_files_of_a_first_save_cut_short_are_ignored(tmp_path):
    _, manager = saved_run(tmp_path, steps=(2,))
    os.remove(tmp_path / "checkpoint")
    assert manager.restore_latest(may_move=True) == (None, [])
