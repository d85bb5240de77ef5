"""The one error type of the datasets package.

It lives in its own module so that every source module can raise it without importing the
registry (which imports them). `datasets.registry` re-exports it for callers.
"""


class DatasetError(ValueError):
    """A dataset flag cannot be honoured; the message names the flag, its value and the fix."""
