"""`failed_start`: a start that fails on its data or flags removes what it wrote, and only
that; a run that checkpointed, or failed otherwise, keeps everything."""

import os

import pytest
import tensorflow as tf

from datasets.errors import DatasetError
from datasets.files import FileFault
from trainers.config.flags import ConfigError
from trainers.engine import failed_start
from trainers.config.record import CHECKPOINT_SUBDIR
from trainers.engine.controller import NonFiniteError
from trainers.engine.preemption import Preempted
from trainers.engine.run_lock import LOCK_FILE, exclusive_training


def files_under(logdir) -> list[str]:
    return sorted(os.path.relpath(os.path.join(folder, name), logdir)
                  for folder, _, names in os.walk(logdir) for name in names)


def write(logdir, *paths):
    for path in paths:
        os.makedirs(os.path.dirname(os.path.join(logdir, path)), exist_ok=True)
        with open(os.path.join(logdir, path), "w") as handle:
            handle.write(path)


def start(logdir, *writes, error):
    """A training start on `logdir` that writes `writes`, then raises `error`."""
    with pytest.raises(type(error)):
        with failed_start.leaves_nothing_behind(str(logdir), lock=exclusive_training(str(logdir))):
            write(logdir, *writes)
            raise error


@pytest.mark.parametrize("error", [ConfigError("flag"), DatasetError("data"), FileFault("file")])
def test_a_new_run_that_fails_on_its_data_or_flags_leaves_no_directory(tmp_path, error):
    start(tmp_path / "run", "config.json", "events.out.tfevents.1", "networks/generator.keras",
          error=error)
    assert not (tmp_path / "run").exists()


def test_a_directory_that_was_there_loses_only_what_the_run_wrote(tmp_path):
    logdir = tmp_path / "run"
    kept = ["config.json", LOCK_FILE, "notes.txt", f"{CHECKPOINT_SUBDIR}/checkpoint",
            f"{CHECKPOINT_SUBDIR}/ckpt-2.index", "networks/generator.keras"]
    write(logdir, *kept)
    start(logdir, "dataset.json", "events.out.tfevents.2", "networks/discriminator.keras",
          "eval/events.out.tfevents.3", error=ConfigError("a user network Keras cannot save"))
    assert files_under(logdir) == sorted(kept)
    assert not (logdir / "eval").exists()


def test_a_lock_file_the_run_made_in_a_users_directory_goes_too(tmp_path):
    logdir = tmp_path / "run"
    write(logdir, "notes.txt")
    start(logdir, "config.json", error=DatasetError("data"))
    assert files_under(logdir) == ["notes.txt"]


@pytest.mark.parametrize("writes, error", [
    ((f"{CHECKPOINT_SUBDIR}/ckpt-2.index",), ConfigError("at the first evaluation")),
    ((), Preempted("SIGTERM")),
    ((), NonFiniteError("NaN")),
    ((), RuntimeError("a bug")),
])
def test_a_run_that_checkpointed_or_stopped_otherwise_keeps_everything(tmp_path, writes, error):
    start(tmp_path / "run", "config.json", "events.out.tfevents.1", *writes, error=error)
    assert files_under(tmp_path / "run") == sorted([LOCK_FILE, "config.json",
                                                    "events.out.tfevents.1", *writes])


def test_a_start_refused_the_lock_removes_nothing_of_the_holders(tmp_path):
    logdir = tmp_path / "run"
    with exclusive_training(str(logdir)):
        write(logdir, "config.json")
        with pytest.raises(ConfigError, match="is being trained by process"):
            with failed_start.leaves_nothing_behind(str(logdir), lock=exclusive_training(str(logdir))):
                pass
        write(logdir, "events.out.tfevents.1")
    assert files_under(logdir) == [LOCK_FILE, "config.json", "events.out.tfevents.1"]


def test_a_remote_run_directory_is_undone_the_same_way(tmp_path):
    logdir = "ram://failed-start/run"
    tf.io.gfile.makedirs(f"{logdir}/{CHECKPOINT_SUBDIR}")
    tf.io.gfile.GFile(f"{logdir}/{CHECKPOINT_SUBDIR}/checkpoint", "w").write("kept")
    with pytest.raises(DatasetError):
        with failed_start.leaves_nothing_behind(logdir, lock=exclusive_training(logdir)):
            tf.io.gfile.makedirs(f"{logdir}/networks")
            tf.io.gfile.GFile(f"{logdir}/networks/generator.keras", "w").write("new")
            tf.io.gfile.GFile(f"{logdir}/config.json", "w").write("new")
            raise DatasetError("data")
    assert failed_start.paths_under(logdir) == {f"{logdir}/{CHECKPOINT_SUBDIR}",
                                                f"{logdir}/{CHECKPOINT_SUBDIR}/checkpoint"}
    with pytest.raises(ConfigError):
        with failed_start.leaves_nothing_behind("ram://failed-start/new",
                                                lock=exclusive_training("ram://failed-start/new")):
            tf.io.gfile.GFile("ram://failed-start/new/config.json", "w").write("new")
            raise ConfigError("flag")
    assert not tf.io.gfile.exists("ram://failed-start/new")


def test_a_removal_that_fails_leaves_the_runs_own_error_to_be_reported(tmp_path, monkeypatch):
    def refuse(path):
        raise tf.errors.PermissionDeniedError(None, None, f"{path}: read-only")

    monkeypatch.setattr(tf.io.gfile, "remove", refuse)
    start(tmp_path / "run", "config.json", error=ConfigError("the flag"))
    assert files_under(tmp_path / "run") == [LOCK_FILE, "config.json"]
