"""`run.py` as a subprocess, the way a user starts it, for the end-to-end tests."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = dict(os.environ, GANTRY_OFFLINE="1", TF_CPP_MIN_LOG_LEVEL="2")
RUN_PY = [sys.executable, os.path.join(ROOT, "run.py")]
# A Fashion-MNIST run small enough that a few cycles take seconds on CPU.
TINY = ["--batch_size=16", "--g_width=8", "--d_width=8", "--latent_dim=16", "--steps_per_loop=2",
        "--shuffle_buffer=256"]


def run(*flags, timeout=300, env=None) -> subprocess.CompletedProcess:
    """`run.py FLAGS` from the repository root; its output captured as text. `env` adds
    environment variables (e.g. PYTHONPATH)."""
    return subprocess.run([*RUN_PY, *flags], cwd=ROOT, env={**ENV, **(env or {})},
                          capture_output=True, text=True, timeout=timeout)
