"""Files on any filesystem TensorFlow reads (a local path, gs://, ram://, ...): records written
atomically, read with an error that names the file, and exclusive locks.

Every record Gantry writes (config.json, best.json, the evaluator's record, an export's
metadata, sample grids, plots) goes through `write_atomically`: the bytes go to a temporary
name beside the target, which is then renamed over it, so a reader racing the writer or a
process killed mid-write never sees half a file. Local paths use `os` (renames are atomic on
POSIX); a path with a scheme (`gs://bucket/run`) uses `tf.io.gfile`, imported only then, so
flag checks that read `config.json` stay free of TensorFlow's start-up time. On object stores a
rename is a copy, but an object only appears once fully written, which gives the same guarantee.

This is the bottom layer: `gan/` and `trainers/` use it, and it imports neither.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import io
import json
import os
import uuid
from typing import IO, Any, BinaryIO, Callable, Iterator


class FileFault(Exception):
    """A file or directory cannot be used as asked; the message names the path and the fix."""


def is_local(path: str) -> bool:
    """False for a path on a TensorFlow filesystem named by a scheme (gs://, ram://, s3://)."""
    return "://" not in path


def user_cache_dir(name: str) -> str:
    """Gantry's cache folder `name` for what is kept across runs (domain evaluators, the
    Inception graph): $XDG_CACHE_HOME/gantry/NAME, else ~/.cache/gantry/NAME."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "gantry", name)


def exists(path: str) -> bool:
    if is_local(path):
        return os.path.exists(path)
    import tensorflow as tf
    return tf.io.gfile.exists(path)


def makedirs(directory: str) -> None:
    if is_local(directory):
        os.makedirs(directory, exist_ok=True)
    else:
        import tensorflow as tf
        tf.io.gfile.makedirs(directory)


def open_file(path: str, mode: str) -> IO:
    if is_local(path):
        return open(path, mode)
    import tensorflow as tf
    return tf.io.gfile.GFile(path, mode)


def _rename(source: str, target: str) -> None:
    if is_local(target):
        os.replace(source, target)
    else:
        import tensorflow as tf
        tf.io.gfile.rename(source, target, overwrite=True)


def _remove_if_present(path: str) -> None:
    with contextlib.suppress(OSError, FileNotFoundError):
        if exists(path):
            if is_local(path):
                os.remove(path)
            else:
                import tensorflow as tf
                tf.io.gfile.remove(path)


def write_atomically(path: str, write: Callable[[BinaryIO], None]) -> None:
    """Calls `write(handle)` on an in-memory buffer, then writes those bytes to `path` under a
    temporary name in the same directory and renames it into place; creates the directory."""
    buffer = io.BytesIO()
    write(buffer)
    directory = os.path.dirname(path) or "."
    temporary = os.path.join(directory, f".{os.path.basename(path)}.{uuid.uuid4().hex}.tmp")
    try:
        makedirs(directory)
        with open_file(temporary, "wb") as handle:
            handle.write(buffer.getvalue())
        _rename(temporary, path)
    except BaseException:
        _remove_if_present(temporary)
        raise


def write_json(path: str, record: dict[str, Any]) -> None:
    """`record` as indented, key-sorted JSON at `path`, written atomically."""
    text = json.dumps(record, indent=2, sort_keys=True).encode()
    write_atomically(path, lambda handle: handle.write(text))


def read_json(path: str, *, holds: str, fix: str,
              parse: Callable[[dict[str, Any]], Any] = lambda record: record) -> Any:
    """`parse` of the JSON object in `path` (by default the object itself); None when there is
    no such file.

    A file that cannot be read, is not a JSON object, or that `parse` rejects (TypeError or
    ValueError: not the record it should be) raises `FileFault`, saying which file, what it
    `holds` (for the user deciding what to do) and the `fix`.
    """
    if not exists(path):
        return None
    try:
        with open_file(path, "rb") as handle:
            record = json.loads(handle.read())
        if not isinstance(record, dict):
            raise ValueError(f"it holds a JSON {type(record).__name__}, not an object")
        return parse(record)
    except (OSError, TypeError, ValueError) as error:  # JSONDecodeError and UnicodeDecodeError too
        raise FileFault(f"{path} is damaged ({error}); it holds {holds}. {fix}") from None


@contextlib.contextmanager
def locked(path: str, *, wait: bool) -> Iterator[IO[str] | None]:
    """Holds an exclusive advisory lock (`flock`) on the local file `path` (created if needed).

    The kernel releases it when the holder exits, however it exits, so a process killed with
    SIGKILL leaves no stale lock. Yields the open file (the holder may write who it is into
    it), or None when `wait` is False and another process holds the lock. Locks are per open
    file, so two holders in one process also exclude each other.
    """
    makedirs(os.path.dirname(path) or ".")
    with open(path, "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except OSError as error:
            if error.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise
            yield None
            return
        try:
            yield handle
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
