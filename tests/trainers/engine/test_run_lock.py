"""One training process per run directory: the second is refused with the holder named;
readers may tidy only while nobody trains."""

import json
import os
import socket

import pytest

from trainers.config.flags import ConfigError
from trainers.engine import run_lock


def test_a_second_training_is_refused_naming_the_holder(tmp_path):
    logdir = str(tmp_path / "run")
    with run_lock.exclusive_training(logdir):
        owner = json.loads((tmp_path / "run" / run_lock.LOCK_FILE).read_text())
        assert owner["pid"] == os.getpid() and owner["host"] == socket.gethostname()
        holder = (f"--logdir={logdir!r} is being trained by process {os.getpid()} on host "
                  f"{socket.gethostname()} (since {owner['since']})")
        with pytest.raises(ConfigError) as refused:
            with run_lock.exclusive_training(logdir):
                pass
        assert holder in str(refused.value) and "another --logdir" in str(refused.value)
        with pytest.raises(ConfigError) as early:
            run_lock.refuse_if_training(logdir)
        assert str(early.value) == str(refused.value)
    with run_lock.exclusive_training(logdir):  # released when the holder finished
        pass


def test_the_early_check_creates_nothing(tmp_path):
    run_lock.refuse_if_training(str(tmp_path / "new"))
    assert not os.path.exists(tmp_path / "new")


def test_readers_may_tidy_only_while_nobody_trains(tmp_path):
    logdir = str(tmp_path)
    with run_lock.free_to_tidy(logdir) as free:
        assert free
    with run_lock.exclusive_training(logdir):
        with run_lock.free_to_tidy(logdir) as free:
            assert not free


def test_an_unwritable_logdir_is_named(tmp_path):
    with pytest.raises(ConfigError, match=r"--logdir='/sys/gantry-run': cannot create its lock "
                                          r"file /sys/gantry-run/\.gantry-lock"):
        with run_lock.exclusive_training("/sys/gantry-run"):
            pass
    with run_lock.free_to_tidy("/sys/gantry-run") as free:
        assert not free


def test_a_remote_logdir_is_locked_by_a_local_file_named_after_it():
    path = run_lock.lock_path("ram://bucket/run")
    assert path.startswith("/") and path == run_lock.lock_path("ram://bucket/run")
    assert path != run_lock.lock_path("ram://bucket/other")
    with run_lock.exclusive_training("ram://bucket/run"):
        with pytest.raises(ConfigError, match="is being trained by process"):
            run_lock.refuse_if_training("ram://bucket/run")


def test_a_new_run_that_fails_before_writing_leaves_no_directory(tmp_path):
    logdir = tmp_path / "new"
    with pytest.raises(RuntimeError, match="setup failed"):
        with run_lock.exclusive_training(str(logdir)):
            raise RuntimeError("setup failed")
    assert not logdir.exists()
    logdir.mkdir()
    (logdir / "config.json").write_text("{}")
    with pytest.raises(RuntimeError):
        with run_lock.exclusive_training(str(logdir)):
            raise RuntimeError("an existing run keeps its directory")
    assert sorted(os.listdir(logdir)) == [run_lock.LOCK_FILE, "config.json"]
