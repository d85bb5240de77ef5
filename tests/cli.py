"""`run.py` started as a user starts it, for the end-to-end tests."""

import atexit
import contextlib
import functools
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator

from tests import warm_start

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = dict(os.environ, GANTRY_OFFLINE="1", TF_CPP_MIN_LOG_LEVEL="2")
RUN_PY = [sys.executable, os.path.join(ROOT, "run.py")]
# A Fashion-MNIST run small enough that a few cycles take seconds on CPU, in float32 on every
# CPU (the default --precision=auto trains in bfloat16 where it is native).
TINY = ["--batch_size=16", "--g_width=8", "--d_width=8", "--latent_dim=16", "--cycles_per_loop=2",
        "--shuffle_buffer=256", "--precision=float32"]
# TINY for cyclegan, which translates images and draws no noise: --latent_dim is not its flag.
TINY_TRANSLATION = [flag for flag in TINY if not flag.startswith("--latent_dim=")]


def run(*flags, timeout=300, env=None, cwd=ROOT) -> subprocess.CompletedProcess:
    """`run.py FLAGS` in `cwd` (the repository root unless given); its output captured as text.
    `env` adds environment variables (e.g. PYTHONPATH). subprocess.TimeoutExpired after
    `timeout` seconds, the run killed."""
    return run_together(flags, timeout=timeout, env=env, cwd=cwd)[0]


def run_together(*flag_lists, timeout=300, env=None, cwd=ROOT) -> list[subprocess.CompletedProcess]:
    """`run(*flags)` for each of `flag_lists`, all started at once so that independent runs
    overlap (most of a short run is single-threaded start-up and tracing); their results in
    order. Output goes to files, not pipes, so no run blocks on a full pipe while another is
    awaited; runs still going when waiting for one times out are killed.

    Runs are forked from a warm interpreter (`tests.warm_start`), which has imported TensorFlow
    and Keras once for all of them, unless `env` sets a variable only a new interpreter reads.
    """
    environment = {**ENV, **(env or {})}
    warm = not any(name.startswith(warm_start.NEEDS_A_FRESH_INTERPRETER)
                   for name in (env or {}))
    with contextlib.ExitStack() as stack:
        directory = stack.enter_context(tempfile.TemporaryDirectory())
        started = []
        for index, flags in enumerate(flag_lists):
            out, err = (os.path.join(directory, f"{index}.{name}") for name in ("out", "err"))
            if warm:
                process = _warm_starter().popen([RUN_PY[1], *flags], cwd, environment, out, err)
            else:
                with open(out, "w") as stdout, open(err, "w") as stderr:
                    process = subprocess.Popen([*RUN_PY, *flags], cwd=cwd, env=environment,
                                               stdout=stdout, stderr=stderr)
            stack.callback(_stop, process)
            started.append((process, out, err))
        results = []
        for process, out, err in started:
            process.wait(timeout=timeout)
            with open(out) as stdout, open(err) as stderr:
                results.append(subprocess.CompletedProcess(process.args, process.returncode,
                                                           stdout.read(), stderr.read()))
        return results


def start(*flags, log: str) -> warm_start.WarmProcess:
    """`run.py FLAGS` from the repository root, in the background, its stdout and stderr both
    in the file `log`; `wait`, `poll` and `kill` it as a `subprocess.Popen`."""
    return _warm_starter().popen([RUN_PY[1], *flags], ROOT, ENV, log, log)


@functools.cache
def _warm_starter() -> warm_start.WarmStarter:
    """This test process's warm-start server, started on first use, ended at exit."""
    starter = warm_start.WarmStarter(cwd=ROOT, env=ENV)
    atexit.register(starter.close)
    return starter


def _stop(process: subprocess.Popen | warm_start.WarmProcess) -> None:
    if process.poll() is None:
        process.kill()
        process.wait()


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def tensorboard(logdir) -> Iterator[str]:
    """`tensorboard --logdir=LOGDIR` on 127.0.0.1 at a free port, as a user starts it; yields
    its base URL once it answers, and stops it afterwards."""
    port = free_port()
    command = os.path.join(os.path.dirname(sys.executable), "tensorboard")
    server = subprocess.Popen([command, f"--logdir={logdir}", "--host=127.0.0.1", f"--port={port}",
                               "--load_fast=false", "--reload_interval=1"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                urllib.request.urlopen(f"{url}/data/logdir", timeout=5).close()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise
                time.sleep(0.5)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)


def get_json(url: str, body=None):
    """GET `url`, or POST `body` as JSON (as TensorBoard's frontend posts to plugins), decoded."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())
