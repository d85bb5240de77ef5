"""Keeps TensorFlow's native (C++) log lines out of a run's output unless `--tensorflow_logs`.

TensorFlow 2.21 logs from C++ through Abseil, and nothing in the process calls
`absl::InitializeLog()`: every such message then goes straight to file descriptor 2, whatever
`TF_CPP_MIN_LOG_LEVEL` says (measured: INFO lines print at level 3). A newcomer reads
"E0000 ... failed" as Gantry's error. The only place left to stop them is the descriptor
itself: `quiet_native_logs` points fd 2 at a pipe read by a small filter process (this module
run as a script), which copies to the real stderr every line but Abseil's INFO and WARNING
lines and the ERROR lines listed in `HARMLESS_ERRORS`. Python's own stderr (Gantry's errors, a
traceback) passes through unchanged and in order.

A process rather than a thread: native code also logs while the interpreter shuts down, after
the last Python code ran (a tf.data iterator's destructor warns then); the filter process reads
until every writer has exited, so those lines are filtered too and nothing is cut off. At exit
the run waits until the filter has written everything logged before, so its last line (an
error message) is printed before the shell's prompt returns.

Pure Python, used before TensorFlow is imported.
"""

from __future__ import annotations

import atexit
import os
import re
import select
import signal
import subprocess
import sys

# Abseil's line prefix: severity letter, MMDD, time (seconds since the epoch when the clock is
# not set up), thread id, file:line]. Python's absl logging writes the same prefix: its lines
# name a .py file, and are Gantry's own (a damaged checkpoint passed over...), always shown.
ABSL_LINE = re.compile(rb"^(?P<severity>[IWEF])\d{4} \d\d:\d\d:\d+\.\d+\s+\d+ (?P<source>\S+):\d+\] ")
# Printed once per native library that logs before absl::InitializeLog().
ABSL_PREAMBLE = b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR"
# The second line of the one multi-line INFO message TensorFlow prints at start-up (its
# cpu_feature_guard: instructions the binary was not compiled for); a continuation line has no
# prefix of its own.
CPU_FEATURES_CONTINUATION = b"To enable the following instructions: "
# ERROR lines TensorFlow prints on every run that report nothing wrong with it:
HARMLESS_ERRORS = (
    # A machine without an NVIDIA driver: TensorFlow then runs on the CPU, which the run's own
    # "--precision=auto" line and --strategy already say.
    b"failed call to cuInit",
    # Grappler's remapper cannot fuse a convolution with the LeakyReLU after it in a training
    # step: Keras's LeakyReLU gradient reads the BiasAdd the fusion would remove. The step
    # computes the same values unfused, and a LeakyReLU whose gradient reads its output (which
    # fuses) was not faster on CPU (benchmarks/fused_activation.py, results/throughput.md).
    b"remapper failed",
)
# Written by the run at exit; the filter answers on the acknowledgement pipe when it reads it.
FLUSHED = b"\0gantry: native log filter, everything before this line is written\0"
WAIT_SECONDS = 5.0


def is_hidden(line: bytes) -> bool:
    """Whether `line` is a native log line a run does not show: Abseil's preamble, an INFO or
    WARNING line from C++, or a `HARMLESS_ERRORS` line. FATAL and other ERROR lines, and every
    line Python's absl logging writes, are shown."""
    if line.startswith((ABSL_PREAMBLE, CPU_FEATURES_CONTINUATION)):
        return True
    match = ABSL_LINE.match(line)
    if match is None or match.group("source").endswith(b".py"):
        return False
    severity = match.group("severity")
    return severity in (b"I", b"W") or (severity == b"E" and any(text in line for text in HARMLESS_ERRORS))


def copy_shown_lines(source, target: int, acknowledge: int) -> None:
    """Copies the lines of `source` (a binary file) that `is_hidden` keeps to fd `target` until
    end of file; on `FLUSHED` (which may end a line written without a newline), writes what
    precedes it and a byte to fd `acknowledge`."""
    for line in source:
        body = line.rstrip(b"\n")
        if body.endswith(FLUSHED):
            line = body[:-len(FLUSHED)]
            os.write(acknowledge, b"1")
        if line and not is_hidden(line.rstrip(b"\n")):
            os.write(target, line)


def quiet_native_logs() -> None:
    """From now on, fd 2 of this process (and of the processes it starts) goes through the
    filter process; at exit, waits (at most WAIT_SECONDS) until it has written what came before."""
    read_end, write_end = os.pipe()
    acknowledged, acknowledge = os.pipe()
    subprocess.Popen([sys.executable, os.path.abspath(__file__), str(acknowledge)],
                     stdin=read_end, stdout=2, pass_fds=(acknowledge,))
    os.close(read_end)
    os.close(acknowledge)
    os.dup2(write_end, 2)
    os.close(write_end)

    def wait_until_written() -> None:
        sys.stderr.flush()
        os.write(2, FLUSHED + b"\n")
        select.select([acknowledged], [], [], WAIT_SECONDS)

    atexit.register(wait_until_written)


if __name__ == "__main__":
    # The filter process: ends when every writer of the pipe has exited, never on a signal
    # meant for the run (Ctrl-C, SIGTERM), so it relays what the run prints while stopping.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    copy_shown_lines(sys.stdin.buffer, sys.stdout.fileno(), int(sys.argv[1]))
