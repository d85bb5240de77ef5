"""Faults survived through `run.py`, as a user meets them: a damaged checkpoint, a second
training process on one logdir, a killed lock holder, paths that are files, damaged records.
Each ends in a finished run or in exit 2 with the path named, never a traceback."""

import json
import os
import re
import time


from tests.cli import TINY, run, start
from trainers.engine.checkpoints import CORRUPT_SUBDIR
from trainers.engine.run_lock import LOCK_FILE

FINISHED = re.compile(r"Finished at step (\d+); weights fingerprint (\w+)")
QUIET = ["--image_every=0", "--histogram_every=0", "--deterministic"]
TOY = ["--dataset=ring8", "--batch_size=32", "--latent_dim=4", "--cycles_per_loop=2", *QUIET]


def finished(result) -> tuple[int, str]:
    assert result.returncode == 0, result.stderr[-3000:]
    step, fingerprint = FINISHED.search(result.stdout).groups()
    return int(step), fingerprint


def refused(result, *names: str) -> str:
    """The one-line error of a run that exited 2, which names each of `names`."""
    assert result.returncode == 2, (result.stdout[-2000:], result.stderr[-3000:])
    assert "Traceback" not in result.stderr
    error = result.stderr.strip().splitlines()[-1]
    assert error.startswith("error: ") and all(name in error for name in names), error
    return error


def truncate(checkpoint_prefix):
    os.truncate(f"{checkpoint_prefix}.data-00000-of-00001", 100)


def test_a_damaged_newest_checkpoint_is_passed_over_and_the_run_finishes_identically(tmp_path):
    logdir = str(tmp_path / "run")
    flags = [*TINY, *QUIET, f"--logdir={logdir}", "--train_cycles=6", "--checkpoint_every=2"]
    reference = finished(run(*flags))
    checkpoints = os.path.join(logdir, "checkpoints")
    truncate(os.path.join(checkpoints, "ckpt-6"))

    resumed = run(*flags)
    assert finished(resumed) == reference  # redone from ckpt-4: the same weights
    assert (f"Checkpoint {checkpoints}/ckpt-6 cannot be read (IndexError: Read less bytes than "
            f"requested); moved to {checkpoints}/{CORRUPT_SUBDIR}/ckpt-6; using "
            f"{checkpoints}/ckpt-4 instead.") in resumed.stderr
    assert sorted(os.listdir(os.path.join(checkpoints, CORRUPT_SUBDIR))) == [
        "ckpt-6.data-00000-of-00001", "ckpt-6.index"]

    for step in (2, 4, 6):
        truncate(os.path.join(checkpoints, f"ckpt-{step}"))
    error = refused(run("--mode=sample", f"--logdir={logdir}", f"--output={tmp_path}/s.png"),
                    f"None of the 3 checkpoints in {checkpoints} can be read")
    assert "Put back an intact copy, or move" in error
    assert not os.path.exists(tmp_path / "s.png")


def test_one_training_process_per_logdir_and_a_killed_holder_leaves_no_lock(tmp_path):
    logdir = str(tmp_path / "run")
    log = tmp_path / "holder.log"
    holder = start(*TOY, f"--logdir={logdir}", "--train_cycles=1000000", log=str(log))
    try:
        lock = os.path.join(logdir, LOCK_FILE)
        deadline = time.monotonic() + 240
        while not (os.path.exists(lock) and os.path.getsize(lock)):
            assert holder.poll() is None and time.monotonic() < deadline, log.read_text()[-2000:]
            time.sleep(0.5)
        owner = json.loads(open(lock).read())
        assert owner["pid"] == holder.pid
        refused(run(*TOY, f"--logdir={logdir}", "--train_cycles=4"),
                f"--logdir='{logdir}' is being trained by process {holder.pid}")
        holder.kill()  # SIGKILL: no handler runs, the lock file stays
        holder.wait(timeout=30)
    finally:
        holder.kill()
        holder.wait()
    step, _ = finished(run(*TOY, f"--logdir={logdir}", "--train_cycles=2"))
    assert step >= 2


def test_paths_that_are_files_and_damaged_records_exit_2_naming_the_file(tmp_path):
    a_file = tmp_path / "a_file"
    a_file.write_text("not a directory")
    refused(run(f"--logdir={a_file}"), f"--logdir='{a_file}' is a file, not a directory")
    refused(run("--mode=sample", f"--logdir={tmp_path}", f"--output={a_file}/x.png"),
            f"--output='{a_file}/x.png' cannot be created: {a_file} is a file")
    refused(run("--mode=export", f"--logdir={tmp_path}", f"--export_dir={a_file}/e"),
            f"--export_dir='{a_file}/e' cannot be created")

    logdir = tmp_path / "run"
    logdir.mkdir()
    (logdir / "config.json").write_text("{truncated")
    for mode in ("train", "sample"):
        refused(run(f"--mode={mode}", f"--logdir={logdir}"),
                f"{logdir}/config.json is damaged", "move it away")


def test_a_damaged_best_record_exits_2_naming_it(tmp_path):
    logdir = tmp_path / "run"
    (logdir / "checkpoints_best").mkdir(parents=True)
    (logdir / "checkpoints_best" / "best.json").write_text('{"score": ')
    refused(run(*TOY, f"--logdir={logdir}", "--train_cycles=2", "--eval_every=2"),
            f"{logdir}/checkpoints_best/best.json is damaged", "Move it away")
    assert os.listdir(logdir) == ["checkpoints_best"]  # as it was: the run's lock file went too


def test_a_run_that_diverges_exits_2_naming_the_flags_that_help(tmp_path):
    logdir = tmp_path / "run"
    error = refused(run(*TOY, f"--logdir={logdir}", "--train_cycles=2", "--g_lr=1e30",
                        "--d_lr=1e30"), "Non-finite values", "--nan_policy=rollback")
    assert "Lower the learning rates" in error
