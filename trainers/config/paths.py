"""The path flags checked against the filesystem before any work starts.

A path flag (`Flag.path`) that names a file where a directory is
needed, or the reverse, or lies under a regular file, or cannot be written in a mode that
writes it, is a `ConfigError` naming the flag, instead of an OS traceback after minutes of
work. Writability is probed by creating and deleting a file, since permission bits say nothing
for root or a read-only mount. Paths on other filesystems (gs://...) are left to the run: only
TensorFlow can look at them, and flags are checked without it.
"""

from __future__ import annotations

import errno
import os
import tempfile

from datasets import files
from trainers.config.flags import DIRECTORY, Config, ConfigError, declared


def check_paths(config: Config) -> None:
    """Raises ConfigError for the first path flag that cannot be used as its mode needs."""
    for flag in declared().values():
        value = getattr(config, flag.name)
        if flag.path and value and files.is_local(value):
            _check(flag.name, value, flag.path, writes=config.mode in flag.written_by)


def _check(flag: str, value: str, kind: str, *, writes: bool) -> None:
    path = os.path.abspath(value)
    if os.path.exists(path):
        if kind == DIRECTORY and not os.path.isdir(path):
            raise ConfigError(f"--{flag}={value!r} is a file, not a directory; give a directory.")
        if kind != DIRECTORY and os.path.isdir(path):
            raise ConfigError(f"--{flag}={value!r} is a directory; give a file path.")
        if kind != DIRECTORY and writes and not os.path.isfile(path):
            raise ConfigError(f"--{flag}={value!r} exists and is not a regular file (a device or "
                              "pipe); give a new file path.")
        where = path if os.path.isdir(path) else os.path.dirname(path)
    else:
        where = _nearest_existing(os.path.dirname(path))
        if not os.path.isdir(where):
            raise ConfigError(f"--{flag}={value!r} cannot be created: {where} is a file, not a "
                              "directory; give a path that is not inside a file.")
    if writes:
        _probe_writable(flag, value, where)


def _nearest_existing(path: str) -> str:
    while not os.path.exists(path):
        path = os.path.dirname(path)
    return path


def _probe_writable(flag: str, value: str, directory: str) -> None:
    """Creates and deletes a file in `directory`, where the first new file would go."""
    try:
        handle, probe = tempfile.mkstemp(dir=directory, prefix=".gantry-write-probe-")
        os.close(handle)
        os.remove(probe)
    except OSError as error:
        reason = ("the disk is full; free some space" if error.errno == errno.ENOSPC else
                  f"{directory} is not writable ({error.strerror}); give a path you can write to")
        raise ConfigError(f"--{flag}={value!r} cannot be written: {reason}.") from None
