"""Which native log lines a run hides, and that the filter passes everything else through."""

import os
import subprocess
import sys
import textwrap

import pytest

from trainers.outputs.native_logs import is_hidden

# Lines TensorFlow 2.21 printed on a CPU-only machine, verbatim but shortened.
INFO = (b"I0000 00:00:1796532996.840734   26904 port.cc:153] oneDNN custom operations are on. "
        b"You may see slightly different numerical results")
WARNING = b"W0000 00:00:1796532996.841216   26904 some_pass.cc:12] a warning"
CUINIT = (b"E0000 00:00:1796532999.022971   26904 cuda_platform.cc:52] failed call to cuInit: "
          b"INTERNAL: CUDA error: Failed call to cuInit: UNKNOWN ERROR (303)")
REMAPPER = (b"E0000 00:00:1796533004.306060   26904 meta_optimizer.cc:967] remapper failed: "
            b"INVALID_ARGUMENT: Mutation::Apply error: fanout 'while/body/_1/gradient_tape'")
OTHER_ERROR = b"E0000 00:00:1796533004.306060   26904 kernel.cc:10] OOM when allocating tensor"
FATAL = b"F0000 00:00:1796533004.306060   26904 check.cc:10] Check failed: x == y"
PREAMBLE = b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR"


@pytest.mark.parametrize("line", [INFO, WARNING, CUINIT, REMAPPER, PREAMBLE])
def test_info_warning_and_known_harmless_errors_are_hidden(line):
    assert is_hidden(line)


# Python's absl logging uses the same prefix: Gantry's own warnings, always shown.
PYTHON_WARNING = (b"W1206 06:50:01.234567 140234 checkpoints.py:95] Checkpoint ckpt-6 cannot be "
                  b"read; using ckpt-4 instead.")


@pytest.mark.parametrize("line", [
    OTHER_ERROR, FATAL, PYTHON_WARNING, b"error: --dataset='x' is unknown: use one of fashion_mnist.",
    b"Traceback (most recent call last):", b"I0000 is not a log line", b"",
    b"WARNING: a Python warning"])
def test_other_errors_gantrys_lines_and_tracebacks_are_shown(line):
    assert not is_hidden(line)


def test_a_process_shows_its_own_stderr_in_order_and_hides_native_lines():
    """Lines written to fd 2 by the process, a child process and Python's stderr, the last one
    without a newline and written just before exit, all arrive; the native ones do not."""
    script = textwrap.dedent(f"""
        import os, subprocess, sys
        from trainers.outputs.native_logs import quiet_native_logs
        quiet_native_logs()
        os.write(2, {INFO!r} + b"\\n" + b"first\\n" + {CUINIT!r} + b"\\n")
        subprocess.run([sys.executable, "-c", "import os; os.write(2, {WARNING!r} + b'\\\\nchild\\\\n')"])
        print("second", file=sys.stderr)
        sys.stderr.write("last, no newline")
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60,
                            cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
                                os.path.abspath(__file__))))))
    assert result.returncode == 0
    assert result.stderr == b"first\nchild\nsecond\nlast, no newline"
