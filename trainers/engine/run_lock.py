"""One training process per run directory.

Training holds an exclusive lock on LOGDIR/.gantry-lock while it runs (in a multi-worker job,
the chief only: the other workers write nothing there but their temporary checkpoint folders).
A second training process on the same --logdir is refused at once, with the holder's pid and
host, instead of both writing checkpoints and event files. The lock is an `flock`, released
by the kernel when its holder exits however it exits, so a `kill -9` leaves no stale lock and
the next run starts.

Sample, eval, export and plot read without the lock: a checkpoint is listed only once it is
complete (TensorFlow writes the listing last, atomically). They take the lock only for a moment,
and only if it is free, to move an unreadable checkpoint aside (`free_to_tidy`).

A logdir on a remote filesystem (gs://...) cannot be locked by the OS: its lock is a local file
named after it, which stops a second run on the same machine but not on another one.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import json
import os
import socket
import tempfile
from typing import Iterator

from datasets import files
from trainers.config.flags import ConfigError

LOCK_FILE = ".gantry-lock"


def lock_path(logdir: str) -> str:
    """LOGDIR/.gantry-lock, or for a remote logdir a local file named by its hash."""
    if files.is_local(logdir):
        return os.path.join(logdir, LOCK_FILE)
    digest = hashlib.sha256(logdir.encode()).hexdigest()[:16]
    return os.path.join(tempfile.gettempdir(), "gantry-locks", f"{digest}{LOCK_FILE}")


@contextlib.contextmanager
def exclusive_training(logdir: str) -> Iterator[None]:
    """Holds the run's lock for a training process; ConfigError naming the holder if taken."""
    path = lock_path(logdir)
    new_run = not files.exists(logdir)
    with contextlib.ExitStack() as held:
        try:
            handle = held.enter_context(files.locked(path, wait=False))
        except OSError as error:
            raise ConfigError(f"--logdir={logdir!r}: cannot create its lock file {path} "
                              f"({error.strerror}); use a --logdir you can write to.") from None
        if handle is None:
            raise ConfigError(_busy(logdir, path))
        handle.seek(0)
        handle.truncate()
        json.dump({"pid": os.getpid(), "host": socket.gethostname(),
                   "since": datetime.datetime.now().astimezone().isoformat(timespec="seconds")},
                  handle)
        handle.flush()
        try:
            yield
        except BaseException:
            if (new_run and files.is_local(logdir) and os.path.isdir(logdir)
                    and os.listdir(logdir) == [LOCK_FILE]):
                # A new run that stopped before writing anything leaves no directory behind
                # (nor one that `failed_start` already removed).
                os.remove(path)
                os.rmdir(logdir)
            raise


@contextlib.contextmanager
def free_to_tidy(logdir: str) -> Iterator[bool]:
    """True while no training process holds the run (the lock is then held by this one), so
    files may be moved in it; False when one trains, or the lock cannot be taken at all (a
    read-only run directory)."""
    with contextlib.ExitStack() as held:
        try:
            handle = held.enter_context(files.locked(lock_path(logdir), wait=False))
        except OSError:
            handle = None
        yield handle is not None


def refuse_if_training(logdir: str) -> None:
    """ConfigError naming the holder when a training process holds the run; creates nothing.

    `run.py` calls it before TensorFlow starts, so a second training process stops at once;
    `exclusive_training` still decides, later, which of two processes started together wins.
    """
    path = lock_path(logdir)
    if not os.path.isfile(path):
        return
    with files.locked(path, wait=False) as handle:
        if handle is None:
            raise ConfigError(_busy(logdir, path))


def _busy(logdir: str, path: str) -> str:
    return (f"--logdir={logdir!r} is being trained by {_holder(path)}. Wait for it to finish, "
            "or stop it (a stopped run resumes from its last checkpoint when started again), "
            "or give this run another --logdir.")


def _holder(path: str) -> str:
    """Who holds the lock, from what it wrote into the lock file."""
    try:
        with open(path) as handle:
            owner = json.load(handle)
        return f"process {owner['pid']} on host {owner['host']} (since {owner['since']})"
    except (OSError, ValueError, KeyError, TypeError):  # written at this moment, or by hand
        return "another process"
