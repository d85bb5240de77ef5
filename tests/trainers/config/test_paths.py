"""Path flags are checked against the filesystem before any work: files where directories
are needed and the reverse, paths under a file, and places that cannot be written."""

import dataclasses
import errno
import os
import tempfile

import pytest

from trainers.config.flags import Config, ConfigError
from trainers.config.paths import check_paths


def config(**flags) -> Config:
    return dataclasses.replace(Config(), **flags)


@pytest.fixture
def a_file(tmp_path):
    path = tmp_path / "a_file"
    path.write_text("x")
    return str(path)


def test_usable_paths_pass_and_create_nothing(tmp_path):
    check_paths(config(logdir=str(tmp_path / "new" / "run")))
    check_paths(config(mode="sample", logdir=str(tmp_path), output=str(tmp_path / "d" / "s.png")))
    check_paths(config(mode="export", logdir=str(tmp_path), export_dir=str(tmp_path / "e")))
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("flag", ["logdir", "export_dir", "evaluator_dir", "data_dir",
                                  "fashion_mnist_dir"])
def test_a_file_given_for_a_directory(a_file, flag):
    with pytest.raises(ConfigError, match=f"^--{flag}='{a_file}' is a file, not a directory"):
        check_paths(config(**{flag: a_file}))


def test_a_directory_given_for_a_file(tmp_path):
    os.mkdir(tmp_path / "d.png")
    with pytest.raises(ConfigError, match=f"^--output='{tmp_path}/d.png' is a directory"):
        check_paths(config(mode="sample", output=str(tmp_path / "d.png")))


@pytest.mark.parametrize("flag, mode", [("output", "sample"), ("logdir", "train"),
                                        ("export_dir", "export")])
def test_a_path_under_a_file(a_file, flag, mode):
    value = os.path.join(a_file, "deeper", "x.png")
    with pytest.raises(ConfigError, match=f"^--{flag}='{value}' cannot be created: {a_file} is "
                                          "a file, not a directory"):
        check_paths(config(mode=mode, **{flag: value}))


def test_a_device_is_not_a_sample_file():
    with pytest.raises(ConfigError, match="^--output='/dev/null' exists and is not a regular file"):
        check_paths(config(mode="sample", output="/dev/null"))


def test_an_unwritable_place_is_named_only_in_the_mode_that_writes_it():
    with pytest.raises(ConfigError, match=r"^--logdir='/sys/gantry-run' cannot be written: /sys "
                                          r"is not writable \("):
        check_paths(config(logdir="/sys/gantry-run"))
    check_paths(config(mode="plot", logdir="/sys/gantry-run"))  # read there, not written


def test_a_full_disk_is_named(tmp_path, monkeypatch):
    def full(**_):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(tempfile, "mkstemp", full)
    with pytest.raises(ConfigError, match="^--logdir=.* cannot be written: the disk is full"):
        check_paths(config(logdir=str(tmp_path / "run")))


def test_remote_paths_are_left_to_the_run():
    check_paths(config(logdir="gs://bucket/run", export_dir="ram://x", mode="export"))
