"""One process at a time prepares a dataset in a TFDS data directory.

Runs started together on a machine whose data directory lacks the dataset (the workers of a
multi-worker job on one host, parallel test workers, two users' jobs sharing
~/tensorflow_datasets) would otherwise all prepare it: TFDS writes each copy into its own
temporary folder and renames it into place at the end, so every process but the first fails
on the rename after redoing the whole preparation. Under `exclusive` the others wait for the
first, then find the data prepared and use it.

The lock is an advisory `flock` on a file next to the data, released by the kernel when its
holder exits, so a process killed while preparing never leaves the others waiting. Remote
(gs://...) and read-only data directories are not locked.
"""

from __future__ import annotations

import contextlib
import os
from typing import Iterator

from datasets import files


def lock_path(data_dir_root: str, name: str) -> str:
    """The lock file of dataset `name` (e.g. "fashion_mnist", "cycle_gan/horse2zebra")."""
    return os.path.join(data_dir_root, f".{name.replace('/', '_')}.gantry-lock")


@contextlib.contextmanager
def exclusive(data_dir_root: str | os.PathLike, name: str) -> Iterator[None]:
    """Holds the preparation lock of `name` in `data_dir_root`, waiting for any other holder.

    Re-check whether the data is prepared after entering: it may have been prepared while
    this process waited.
    """
    data_dir_root = os.fspath(data_dir_root)
    if not files.is_local(data_dir_root):
        yield
        return
    with contextlib.ExitStack() as held:
        try:
            held.enter_context(files.locked(lock_path(data_dir_root, name), wait=True))
        except OSError:  # a read-only data directory: preparing there fails anyway, saying why
            pass
        yield
