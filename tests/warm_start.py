"""`python run.py FLAGS` started by forking an interpreter that has already imported
TensorFlow and Keras, for the end-to-end tests.

Importing TensorFlow and Keras is 8-13 s of one core, and the suite starts about a hundred
`run.py` processes: that import was the largest single cost of `make test`. `WarmStarter`
starts one server per test process (`python -m tests.warm_start`), which imports them once
and forks a child per run. The child becomes what `python run.py FLAGS` would be: its stdin
is /dev/null, its stdout and stderr the given files, its working directory, environment,
`sys.argv` and `sys.path[0]` those of the command, numpy's global generator reseeded (Python's
`random` reseeds itself at fork); then it runs the script as `__main__` and leaves through the
interpreter's own exit (atexit functions, non-daemon threads, uncaught tracebacks, exit codes).
Its exit code reaches the caller as `subprocess` reports one: negative for a signal.

Forking is safe here because the server has never run a TensorFlow op: the runtime (devices,
thread pools) is created in each child, by the run. Variables read when an interpreter starts
or TensorFlow loads (`NEEDS_A_FRESH_INTERPRETER`) cannot change in a child; `tests.cli` starts
a plain process for a command that sets them.

Protocol, one JSON object per line: the client writes {"start": [id, argv, cwd, env, stdout,
stderr]} or {"kill": pid}; the server answers {"started": [id, pid]} and, when a child ends,
{"exited": [pid, returncode]}. End of input stops the server and kills its children.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time

# Environment variables that only a new interpreter honours: Python's own start-up settings,
# and those TensorFlow and Keras read as they load (Keras finds its home directory then).
NEEDS_A_FRESH_INTERPRETER = ("PYTHON", "TF_", "KERAS_", "LD_", "OMP_", "MALLOC_", "HOME")


class WarmStarter:
    """The client: starts the server, then runs in children of it (`popen`)."""

    def __init__(self, cwd: str, env: dict[str, str]):
        self._log = tempfile.TemporaryFile("w+")
        self._server = subprocess.Popen([sys.executable, "-m", "tests.warm_start"], cwd=cwd,
                                        env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=self._log)
        self._pending = b""
        self._started: dict[int, int] = {}
        self._exited: dict[int, int] = {}
        self._next_id = 0

    def popen(self, argv: list[str], cwd: str, env: dict[str, str], stdout: str, stderr: str
              ) -> WarmProcess:
        """`argv` (the script, then its arguments) started in a child, its output written to
        the files `stdout` and `stderr` (which may be the same file)."""
        self._next_id += 1
        self._send({"start": [self._next_id, argv, cwd, env, stdout, stderr]})
        while self._next_id not in self._started:
            self._receive(deadline=time.monotonic() + 120)
        return WarmProcess(self, self._started.pop(self._next_id), [sys.executable, *argv])

    def close(self) -> None:
        """Ends the server (and any child still running)."""
        self._server.stdin.close()
        self._server.wait(timeout=60)

    def returncode_of(self, pid: int, deadline: float) -> int:
        """The child's return code once it has ended; TimeoutError at `deadline`
        (`time.monotonic()`), the child still running."""
        while pid not in self._exited:
            self._receive(deadline)
        return self._exited.pop(pid)

    def kill(self, pid: int) -> None:
        """SIGKILL to the child; its exit is still reported."""
        self._send({"kill": pid})

    def _send(self, message: dict) -> None:
        self._server.stdin.write(json.dumps(message).encode() + b"\n")
        self._server.stdin.flush()

    def _receive(self, deadline: float) -> None:
        """Reads what the server has said by `deadline` into `_started` and `_exited`."""
        remaining = max(deadline - time.monotonic(), 0)
        if not select.select([self._server.stdout], [], [], remaining)[0]:
            raise TimeoutError("no answer from the warm-start server in time")
        chunk = os.read(self._server.stdout.fileno(), 65536)
        if not chunk:
            self._log.seek(0)
            raise RuntimeError(f"the warm-start server ended (exit {self._server.wait()}):\n"
                               f"{self._log.read()[-3000:]}")
        self._pending += chunk
        *lines, self._pending = self._pending.split(b"\n")
        for line in lines:
            message = json.loads(line)
            if "started" in message:
                request_id, pid = message["started"]
                self._started[request_id] = pid
            else:
                pid, returncode = message["exited"]
                self._exited[pid] = returncode


class WarmProcess:
    """A run started by `WarmStarter.popen`, with the part of `subprocess.Popen`'s interface
    the tests use: `args`, `returncode`, `poll`, `wait` and `kill`."""

    def __init__(self, starter: WarmStarter, pid: int, args: list[str]):
        self.args, self.pid, self.returncode = args, pid, None
        self._starter = starter

    def poll(self) -> int | None:
        try:
            return self.wait(timeout=0)
        except subprocess.TimeoutExpired:
            return None

    def wait(self, timeout: float | None = None) -> int:
        """The return code; subprocess.TimeoutExpired after `timeout` seconds, still running."""
        if self.returncode is None:
            deadline = time.monotonic() + (timeout if timeout is not None else 10 ** 9)
            try:
                self.returncode = self._starter.returncode_of(self.pid, deadline)
            except TimeoutError:
                raise subprocess.TimeoutExpired(self.args, timeout) from None
        return self.returncode

    def kill(self) -> None:
        if self.returncode is None:
            self._starter.kill(self.pid)


def serve() -> list | None:
    """The server's loop. Returns in a forked child only, with that child's start request;
    returns None in the server when its input ends."""
    import keras  # noqa: F401  (the imports every child inherits)
    import tensorflow
    # Listing the devices reads the physical devices without starting the runtime (a child
    # can still split the CPU). Left to each child, it would print a failed cuInit on every
    # machine without a GPU, even in a run that exits on a bad flag, where a cold `run.py`
    # never loads TensorFlow.
    tensorflow.config.list_physical_devices()

    children: set[int] = set()
    pending = b""
    while True:
        if select.select([0], [], [], 0.05)[0]:
            chunk = os.read(0, 65536)
            if not chunk:
                for pid in children:
                    os.kill(pid, signal.SIGKILL)
                return None
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                message = json.loads(line)
                if "kill" in message:
                    if message["kill"] in children:
                        os.kill(message["kill"], signal.SIGKILL)
                    continue
                pid = os.fork()
                if pid == 0:
                    return message["start"]
                children.add(pid)
                _answer({"started": [message["start"][0], pid]})
        while children:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            children.discard(pid)
            _answer({"exited": [pid, os.waitstatus_to_exitcode(status)]})


def _answer(message: dict) -> None:
    os.write(1, json.dumps(message).encode() + b"\n")


def become(argv: list[str], cwd: str, env: dict[str, str], stdout: str, stderr: str) -> None:
    """Turns the forked child into the process `argv` would have started, up to running it."""
    import numpy
    with open(os.devnull, "rb") as null:
        os.dup2(null.fileno(), 0)
    for fd, path in ((1, stdout), (2, stderr)):
        if fd == 2 and path == stdout:  # both to one file, as `stderr=subprocess.STDOUT`
            os.dup2(1, 2)
            continue
        target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(target, fd)
        os.close(target)
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    sys.argv = list(argv)
    sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))
    numpy.random.seed()


if __name__ == "__main__":
    request = serve()
    if request is not None:
        _, child_argv, *where = request
        become(child_argv, *where)
        import runpy
        runpy.run_path(child_argv[0], run_name="__main__")
