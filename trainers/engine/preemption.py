"""Stopping cleanly when the machine is taken away: checkpoint at the next loop end, then exit.

A preempted job receives SIGTERM (Ctrl-C sends SIGINT). Training stops at the end of the
current compiled loop, saves a checkpoint there, and exits with `RESTART_EXIT_CODE`; rerunning
the same command resumes from that step with nothing lost. Under `MultiWorkerMirroredStrategy`
all workers must stop at the same step, which TensorFlow's `PreemptionCheckpointHandler`
agrees on through the cluster's coordination service; on one worker a signal handler does.
A worker killed with SIGKILL cannot save: the job then resumes from the last periodic
checkpoint (`--checkpoint_every`).
"""

from __future__ import annotations

import signal
import threading
from typing import Callable

import tensorflow as tf

# TensorFlow's convention for "preempted, checkpoint saved, please restart me".
RESTART_EXIT_CODE = 42


class Preempted(Exception):
    """Training stopped on a termination signal after saving a checkpoint at `step`."""

    def __init__(self, step: int):
        super().__init__(f"Stopped by a termination signal; checkpoint saved at step {step}. "
                         "Rerun the same command to resume.")
        self.step = step


class SignalPreemption:
    """Single worker: SIGTERM or SIGINT asks for a checkpoint at the next loop end."""

    def __init__(self, signals=(signal.SIGTERM, signal.SIGINT)):
        self._requested = threading.Event()
        self._previous = {}
        if threading.current_thread() is threading.main_thread():
            for number in signals:
                self._previous[number] = signal.signal(number, self._handle)

    def _handle(self, number, frame):
        del number, frame
        self._requested.set()

    def request(self) -> None:
        """What a signal does; also for tests and embedding code."""
        self._requested.set()

    def check(self, step: int, save: Callable[[], object]) -> None:
        """At a loop end: saves and raises `Preempted` when a stop was requested."""
        if self._requested.is_set():
            save()
            raise Preempted(step)

    def close(self) -> None:
        for number, handler in self._previous.items():
            signal.signal(number, handler)
        self._previous = {}


class ClusterPreemption:
    """Multi-worker: TensorFlow's PreemptionCheckpointHandler saves on every worker at one step."""

    def __init__(self, strategy: tf.distribute.Strategy, manager):
        self._manager = manager
        self._step = 0
        self._handler = tf.distribute.experimental.PreemptionCheckpointHandler(
            strategy.cluster_resolver, manager.writer,
            termination_config=tf.distribute.experimental.TerminationConfig(exit_fn=self._exit))

    def _exit(self) -> None:
        self._manager.discard_worker_copy()
        raise Preempted(self._step)

    def check(self, step: int, save: Callable[[], object]) -> None:
        """At a loop end: the handler saves and exits (through `Preempted`) when any worker
        was signalled."""
        del save
        self._step = step
        self._handler.save_checkpoint_if_preempted(checkpoint_number=step)

    def close(self) -> None:
        """Nothing to undo: the handler's watcher threads are daemons."""
