"""The two-worker case: a MultiWorkerMirroredStrategy job on 127.0.0.1 with one worker
SIGKILLed after the first checkpoint, what its peer does then, and the restart of both."""

from __future__ import annotations

import dataclasses
import json
import os
import random
import re
import socket
import subprocess
import time

from benchmarks.chaos_logdir import EndState, end_state, latest_checkpoint_step
from benchmarks.chaos_moments import moment
from benchmarks.chaos_processes import ENVIRONMENT, Process, kill, launch, read_text, wait

# The two-worker job of tests/test_multi_worker.py.
WORKER_FLAGS = ("--strategy=multi_worker", "--dataset=ring8", "--batch_size=32", "--latent_dim=4",
                "--d_updates=2", "--histogram_every=0", "--image_every=0", "--deterministic",
                "--seed=0")


def free_ports(count: int) -> list[int]:
    """Ports free on 127.0.0.1 now (bound to port 0, then released), for the cluster spec.

    tests/test_multi_worker.py has its own copy: a benchmark does not import tests.
    """
    sockets = [socket.socket() for _ in range(count)]
    for sock in sockets:
        sock.bind(("127.0.0.1", 0))
    ports = [sock.getsockname()[1] for sock in sockets]
    for sock in sockets:
        sock.close()
    return ports


def launch_job(flags: list[str], directory: str, name: str) -> list[Process]:
    """Both workers of a two-worker job on 127.0.0.1, each with its TF_CONFIG."""
    ports = free_ports(2)
    workers = []
    for index in range(2):
        tf_config = {"cluster": {"worker": [f"127.0.0.1:{port}" for port in ports]},
                     "task": {"type": "worker", "index": index}}
        workers.append(launch(flags, directory, f"{name}-worker{index}",
                              {**ENVIRONMENT, "TF_CONFIG": json.dumps(tf_config)}))
    return workers


def wait_job(workers: list[Process]) -> None:
    for worker in workers:
        wait(worker)


@dataclasses.dataclass(frozen=True)
class WorkerCase:
    reference: list[tuple[int, str] | None]
    resumed: list[tuple[int, str] | None]
    killed_worker: int
    moment: str
    reached: int
    resumed_from: int
    survivor: str
    failures: list[str]
    checkpoint_every: int
    end: EndState

    def identical(self) -> bool:
        """Both restarted workers hold the weights of both reference workers."""
        expected = self.reference[0]
        return expected is not None and self.reference[1] == expected and self.resumed == [
            expected, expected]

    def within_budget(self) -> bool:
        return self.reached - self.resumed_from <= self.checkpoint_every

    def passed(self) -> bool:
        return (not self.failures and self.identical() and self.within_budget()
                and self.end.clean())


def survivor_behaviour(survivor: Process, hang_timeout: float) -> str:
    """What the other worker does after its peer's SIGKILL: exits (how) or hangs (then killed)."""
    began = time.monotonic()
    try:
        code = survivor.popen.wait(timeout=hang_timeout)
    except subprocess.TimeoutExpired:
        kill(survivor)
        return f"still running after {hang_timeout:.0f} s (blocked on its collectives); SIGKILLed"
    return (f"exited by itself with code {code} after {time.monotonic() - began:.1f} s: "
            f"{exception_summary(read_text(survivor.stderr))}")


def exception_summary(stderr: str) -> str:
    """The Python exception a process died of, and why its collectives were aborted, if so."""
    raised = re.findall(r"^([\w.]+(?:Error|Exception)): ?(.*)$", stderr, re.MULTILINE)
    aborted = re.search(r"Collective ops is aborted by: (.*)$", stderr, re.MULTILINE)
    summary = f"{raised[-1][0].rsplit('.', 1)[-1]}: {raised[-1][1]}" if raised else "no exception"
    return summary + (f" (collective ops aborted by: {aborted.group(1)[:160]})" if aborted else "")


def worker_flags(args) -> list[str]:
    return [*WORKER_FLAGS, f"--train_cycles={args.worker_train_steps}",
            f"--checkpoint_every={args.worker_checkpoint_every}",
            f"--cycles_per_loop={args.worker_steps_per_loop}"]


def two_worker_case(args, rng: random.Random, directory: str) -> WorkerCase:
    """Reference job, a job with one worker SIGKILLed after its first checkpoint, the restart."""
    flags = worker_flags(args)
    reference_logdir = os.path.join(directory, "workers-reference")
    reference = launch_job([*flags, f"--logdir={reference_logdir}"], directory, "workers-reference")
    wait_job(reference)
    failures = [f"reference worker {i}: {w.failure()}" for i, w in enumerate(reference) if w.failure()]
    logdir = os.path.join(directory, "workers-chaos")
    job = launch_job([*flags, f"--logdir={logdir}"], directory, "workers-chaos")
    victim = rng.randint(0, 1)
    if wait_for_first_save(job) is None:
        failures += [f"chaos worker {i} before the first checkpoint: {w.failure()}"
                     for i, w in enumerate(job) if w.failure()]
    else:
        time.sleep(rng.uniform(0, args.worker_kill_window))
    kill(job[victim])
    survivor = survivor_behaviour(job[1 - victim], args.hang_timeout)
    started_from = latest_checkpoint_step(logdir)
    restart = launch_job([*flags, f"--logdir={logdir}"], directory, "workers-restart")
    for worker in restart:
        worker.started_from = started_from
    wait_job(restart)
    failures += [f"restarted worker {i}: {w.failure()}" for i, w in enumerate(restart) if w.failure()]
    return WorkerCase(reference=[w.fingerprint() for w in reference],
                      resumed=[w.fingerprint() for w in restart], killed_worker=victim,
                      moment=moment(job[victim], logdir),
                      reached=max(worker.reached_step() for worker in job),
                      resumed_from=restart[0].resumed_step(), survivor=survivor,
                      failures=failures, checkpoint_every=args.worker_checkpoint_every,
                      end=end_state(logdir, reference_logdir))


def wait_for_first_save(job: list[Process]) -> float | None:
    """When the chief finished its first checkpoint (None: a worker exited first)."""
    while all(worker.popen.poll() is None for worker in job):
        saved = next((e.time for e in job[0].events() if e.name == "saved"), None)
        if saved is not None:
            return saved
        time.sleep(0.05)
    return None
