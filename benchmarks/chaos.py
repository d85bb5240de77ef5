"""Kill -9 soak: SIGKILL a deterministic training run again and again, resume it each time, and
check that it ends with the weights of a run that was never interrupted.

Usage, from the repository root:

    python benchmarks/chaos.py                      # 20 kills, then the two-worker case (~15 min)
    python benchmarks/chaos.py --kills=3 --no-workers --train_cycles=200   # a quick check

Single process (benchmarks/chaos_soak.py). A reference run trains to the end undisturbed
(`--deterministic`, Fashion-MNIST with the tiny networks of tests/cli.py, a checkpoint and an
evaluation every 50 cycles) and prints `Finished at step N; weights fingerprint X`. The chaos run,
in another logdir, is started, killed with SIGKILL, restarted with the same command (it resumes
from its latest checkpoint), `--kills` times, and then runs to the end; its fingerprint must equal
the reference's. The kills rotate over four targets, each with moments drawn from `--seed`:

- `random`: a uniform moment between the launch and the reference's second checkpoint;
- `checkpoint`: a uniform moment inside the 1st or 2nd checkpoint save of the process (within
  80% of the reference's mean save time, since saves vary);
- `checkpoint-temp`: as soon as TensorFlow's `checkpoints/ckpt-N_temp/` appears on disk (a
  save writes its shards there, merges them into `ckpt-N.index` and `ckpt-N.data-*`, removes the
  folder, then rewrites the `checkpoint` state file, atomically, to name ckpt-N);
- `evaluation`: a uniform moment inside the 1st or 2nd evaluation (`--eval_every`; within 80%
  of the reference's mean evaluation time).

How a moment is known: every run.py process is started through benchmarks/chaos_observer.py,
which wraps four Gantry functions so that each writes a marker line before and after its event;
the last line a killed process wrote classifies the kill (benchmarks/chaos_moments.py):
`start-up`, `training steps`, `evaluation`, `checkpoint write` or `between jobs`. For checkpoint
writes and evaluations the files left on disk are named too. A target names where a kill was
aimed; the moment, where it landed.

Per kill: `reached` is the last step the killed process finished, `resumed` the step the next
process restored (its `run` line), `cycles lost` their difference, and `s lost` the time from
the kill until a later process finished a loop at or past `reached` (restart, tracing and the
re-done cycles), cut at the next kill when that comes first (marked `>=`). The mean time lost per
kill is the mean of that column; the chaos run's wall time minus the reference's is shown beside
it.

What Gantry promises after a kill, checked at the end (benchmarks/chaos_logdir.py): a restart is
never refused by the run lock (the kernel releases the flock on LOGDIR/.gantry-lock when its
holder dies); no `*_temp` folder is left (the chief deletes those of saves cut short in
checkpoints/ when it starts, every kill is followed by a restart, and the last process is never
killed; checkpoints_best/ is not swept, so a best save cut short must be cleaned by its redo);
nothing is moved into `checkpoints/corrupt/` (a kill never damages a listed checkpoint). Other
entries the reference's LOGDIR lacks are reported; event files, one per process, are left aside.

Two workers (benchmarks/chaos_workers.py; skip with `--no-workers`): a two-worker
MultiWorkerMirroredStrategy job on 127.0.0.1 on the ring8 toy (as tests/test_multi_worker.py),
an uninterrupted reference job, then a job in which one worker (drawn from `--seed`) is SIGKILLed
after the first checkpoint; the script records what the survivor does for `--hang_timeout`
seconds (it exits or hangs on its collectives), SIGKILLs it if it is still alive, restarts both,
and checks that both print the reference's fingerprint, that the cycles lost are at most the
job's `--checkpoint_every`, and the end state as above.

The Fashion-MNIST evaluation needs Gantry's domain evaluator: a small one is trained once into
WORKDIR/evaluator (one epoch on 5,000 images: only its determinism matters here) and reused.

A full default run writes benchmarks/results/chaos.md (benchmarks/chaos_report.py). The exit
status is 1 when a restart failed or was refused, a final fingerprint or the best checkpoint
record differs from its reference's, or a `*_temp` folder or a `corrupt/` folder is left.
"""

from __future__ import annotations

import argparse
import os
import random
import shlex
import shutil
import sys
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)

from benchmarks.chaos_logdir import read_best_record  # noqa: E402
from benchmarks.chaos_processes import run_to_end  # noqa: E402
from benchmarks.chaos_report import describe, kill_table, soak_verdict  # noqa: E402
from benchmarks.chaos_report import worker_verdict, write_results  # noqa: E402
from benchmarks.chaos_soak import plan_kills, reference_timing, soak  # noqa: E402
from benchmarks.chaos_workers import two_worker_case, worker_flags  # noqa: E402

RESULTS_FILE = os.path.join(REPO_ROOT, "benchmarks", "results", "chaos.md")
# The tiny Fashion-MNIST networks of tests/cli.py; a 2-D toy ignores the widths.
TINY = ("--batch_size=16", "--g_width=8", "--d_width=8", "--latent_dim=16", "--shuffle_buffer=256")


def parse_args() -> tuple[argparse.Namespace, bool]:
    """The arguments, and whether they are all the defaults (only then are results written)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0, help="seeds the kill moments")
    parser.add_argument("--dataset", default="fashion_mnist",
                        help="fashion_mnist (tiny networks, domain evaluator), ring8 or grid25")
    parser.add_argument("--train_cycles", type=int, default=600,
                        help="a multiple of --checkpoint_every and --eval_every")
    parser.add_argument("--checkpoint_every", type=int, default=50)
    parser.add_argument("--eval_every", type=int, default=50)
    parser.add_argument("--eval_samples", type=int, default=500)
    parser.add_argument("--cycles_per_loop", type=int, default=25)
    parser.add_argument("--single", action=argparse.BooleanOptionalAction, default=True,
                        help="run the single-process soak")
    parser.add_argument("--workers", action=argparse.BooleanOptionalAction, default=True,
                        help="run the two-worker case")
    parser.add_argument("--worker_train_steps", type=int, default=100)
    parser.add_argument("--worker_checkpoint_every", type=int, default=25)
    parser.add_argument("--worker_steps_per_loop", type=int, default=5)
    parser.add_argument("--worker_kill_window", type=float, default=5.0,
                        help="the worker is killed this many seconds at most after the first save")
    parser.add_argument("--hang_timeout", type=float, default=60.0,
                        help="seconds the surviving worker is watched before it is SIGKILLed")
    parser.add_argument("--workdir", default="/tmp/gantry-chaos")
    args = parser.parse_args()
    if args.train_cycles % args.checkpoint_every or args.train_cycles % args.eval_every:
        parser.error(f"--train_cycles={args.train_cycles} must be a multiple of --checkpoint_every "
                     "and --eval_every, so that every process has a save and an evaluation left")
    defaults = {key: parser.get_default(key) for key in vars(args) if key != "workdir"}
    return args, all(getattr(args, key) == value for key, value in defaults.items())


def training_flags(args, evaluator_dir: str) -> list[str]:
    flags = ["--deterministic", "--seed=0", f"--dataset={args.dataset}",
             f"--train_cycles={args.train_cycles}", f"--checkpoint_every={args.checkpoint_every}",
             f"--eval_every={args.eval_every}", f"--cycles_per_loop={args.cycles_per_loop}",
             "--image_every=0", "--histogram_every=0", *TINY]
    if args.dataset == "fashion_mnist":
        flags += [f"--eval_samples={args.eval_samples}", f"--evaluator_dir={evaluator_dir}"]
    return flags


def ensure_evaluator(args, evaluator_dir: str) -> None:
    """Trains the small domain evaluator once into WORKDIR/evaluator (Fashion-MNIST only)."""
    if args.dataset != "fashion_mnist" or (os.path.isdir(evaluator_dir) and os.listdir(evaluator_dir)):
        return
    print("Training a small domain evaluator (once) ...", flush=True)
    run_to_end(["--mode=train_evaluator", f"--evaluator_dir={evaluator_dir}",
                "--evaluator_epochs=1", "--evaluator_train_examples=5000"], args.workdir, "evaluator")


def single_process_report(args, runs: str) -> tuple[list[str], bool]:
    """The reference run, the soak, and their report lines; whether the soak passed."""
    evaluator_dir = os.path.join(args.workdir, "evaluator")
    ensure_evaluator(args, evaluator_dir)
    flags = training_flags(args, evaluator_dir)
    print(f"[{time.strftime('%H:%M:%S')}] reference run ...", flush=True)
    logdir, reference_logdir = os.path.join(runs, "chaos"), os.path.join(runs, "reference")
    reference = run_to_end([*flags, f"--logdir={reference_logdir}"], runs, "reference")
    if reference.fingerprint() is None:
        sys.exit(f"The reference run printed no fingerprint; see {reference.stdout}")
    timing = reference_timing(reference)
    print(f"[{time.strftime('%H:%M:%S')}] reference: {describe(reference.fingerprint())}, "
          f"{timing.wall:.0f} s, start-up {timing.startup:.1f} s, save {timing.save * 1000:.0f} ms, "
          f"evaluation {timing.evaluation:.2f} s; {args.kills} kills ...", flush=True)
    every = {"save": args.checkpoint_every, "eval": args.eval_every}
    plan = plan_kills(args.kills, random.Random(args.seed), timing)
    result = soak([*flags, f"--logdir={logdir}"], logdir, reference_logdir, runs, plan, every,
                  args.train_cycles)
    verdict, passed = soak_verdict(result, reference.fingerprint(),
                                   read_best_record(reference_logdir), timing.wall, args.kills)
    lines = [f"Single process: run.py {shlex.join(flags)} --logdir=LOGDIR", ""]
    return lines + kill_table(result.kills) + [""] + verdict, passed


def worker_report(args, runs: str) -> tuple[list[str], bool]:
    print(f"[{time.strftime('%H:%M:%S')}] two workers ...", flush=True)
    case = two_worker_case(args, random.Random(f"workers-{args.seed}"), runs)
    lines = [f"Two workers: run.py {shlex.join(worker_flags(args))} --logdir=LOGDIR", ""]
    return lines + worker_verdict(case), case.passed()


def main() -> int:
    args, is_default = parse_args()
    runs = os.path.join(args.workdir, "runs")
    shutil.rmtree(runs, ignore_errors=True)
    os.makedirs(runs)
    load = os.getloadavg()[0]
    cases = [case for case, wanted in ((single_process_report, args.single),
                                       (worker_report, args.workers)) if wanted]
    body, passed = [], True
    for case in cases:
        lines, case_passed = case(args, runs)
        body += lines + [""]
        passed = passed and case_passed
    body.append(f"Load average (1 min) at the start and the end: {load:.1f}, "
                f"{os.getloadavg()[0]:.1f}; verdict: {'PASS' if passed else 'FAIL'}")
    print("\n" + "\n".join(body), flush=True)
    if is_default:
        write_results(RESULTS_FILE, shlex.join(["python", "benchmarks/chaos.py", *sys.argv[1:]]),
                      body)
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
