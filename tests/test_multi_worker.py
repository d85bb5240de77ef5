"""Two worker processes on 127.0.0.1 under MultiWorkerMirroredStrategy: identical weights,
chief-only files, and a job stopped by SIGTERM that resumes from its saved step."""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

import tensorflow as tf

from trainers.engine.run_lock import LOCK_FILE
from trainers.outputs import hparams, summaries

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FLAGS = ["--strategy=multi_worker", "--dataset=ring8", "--batch_size=32", "--latent_dim=4",
         "--d_updates=2", "--cycles_per_loop=2", "--histogram_every=0"]
FINISHED = re.compile(r"Finished at step (\d+); weights fingerprint (\w+)")


def free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    for sock in sockets:
        sock.bind(("127.0.0.1", 0))
    ports = [sock.getsockname()[1] for sock in sockets]
    for sock in sockets:
        sock.close()
    return ports


def start_job(logdir, *flags):
    ports = free_ports(2)
    workers = []
    for index in range(2):
        tf_config = {"cluster": {"worker": [f"127.0.0.1:{port}" for port in ports]},
                     "task": {"type": "worker", "index": index}}
        env = dict(os.environ, TF_CONFIG=json.dumps(tf_config), GANTRY_OFFLINE="1",
                   TF_CPP_MIN_LOG_LEVEL="2")
        workers.append(subprocess.Popen(
            [sys.executable, os.path.join(ROOT, "run.py"), *FLAGS, *flags, f"--logdir={logdir}"],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    return workers


def finish(workers, timeout=240):
    outputs = []
    try:
        for worker in workers:
            out, err = worker.communicate(timeout=timeout)
            outputs.append((worker.returncode, out, err))
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
    return outputs


def test_two_workers_train_in_lockstep_and_only_the_chief_writes(tmp_path):
    logdir = tmp_path / "run"
    workers = start_job(logdir, "--train_cycles=6", "--checkpoint_every=2", "--image_every=2")
    outputs = finish(workers)
    for code, out, err in outputs:
        assert code == 0, err[-3000:]
    finished = [FINISHED.search(out).groups() for _, out, _ in outputs]
    assert finished[0] == finished[1] and finished[0][0] == "6"
    assert "step 6/6" in outputs[0][1] and "step 6/6" not in outputs[1][1]  # progress: chief only
    checkpoint = tf.train.latest_checkpoint(str(logdir / "checkpoints"))
    assert checkpoint.endswith("ckpt-6")
    iterations = [tf.train.load_variable(checkpoint, name) for name, _ in tf.train.list_variables(checkpoint)
                  if name.startswith("optimizers/discriminator/") and "iteration" in name]
    assert iterations == [12]
    assert sorted(os.listdir(logdir)) == [LOCK_FILE, "checkpoints", "config.json", "dataset.json",
                                          *[n for n in os.listdir(logdir) if n.startswith("events.")],
                                          "samples.png"]  # the chief's, at the end
    assert json.loads((logdir / LOCK_FILE).read_text())["pid"] == workers[0].pid  # the chief's
    assert len([n for n in os.listdir(logdir) if n.startswith("events.")]) == 1
    assert "samples" in summaries.read_event_tags(str(logdir))["images"]
    assert hparams.read_hparams(str(logdir)).values["strategy"] == "multi_worker"  # one session


def test_sigterm_to_one_worker_checkpoints_the_job_which_then_resumes(tmp_path):
    logdir = tmp_path / "run"
    workers = start_job(logdir, "--train_cycles=100000", "--checkpoint_every=100000", "--image_every=0")
    try:
        deadline = time.monotonic() + 120
        while not list((logdir).glob("events.*")):
            assert time.monotonic() < deadline and all(w.poll() is None for w in workers)
            time.sleep(0.2)
        time.sleep(3)
        workers[1].send_signal(signal.SIGTERM)
        outputs = finish(workers, timeout=120)
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
    steps = set()
    for code, _, err in outputs:
        assert code == 42, err[-3000:]
        steps.add(int(re.search(r"checkpoint saved at step (\d+)", err).group(1)))
    (saved,) = steps
    assert tf.train.latest_checkpoint(str(logdir / "checkpoints")).endswith(f"ckpt-{saved}")
    assert not (logdir / ".worker-1-tmp").exists()

    resumed = finish(start_job(logdir, f"--train_cycles={saved + 4}", "--checkpoint_every=100000",
                               "--image_every=0"))
    for code, _, err in resumed:
        assert code == 0, err[-3000:]
    finished = {FINISHED.search(out).groups() for _, out, _ in resumed}
    assert len(finished) == 1 and int(finished.pop()[0]) == saved + 4
    steps_logged = [step for step, _ in summaries.read_scalars(str(logdir), "generator/loss")]
    assert steps_logged == sorted(steps_logged) and steps_logged[-1] == saved + 4
