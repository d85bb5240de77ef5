"""Weights fingerprints of a short `--deterministic` run of every preset and of a few features.

Usage, from the root of the checkout to measure (or name it with `--repo`):

    python benchmarks/fingerprints.py --json /tmp/before.json      # every row, 20 cycles each
    python benchmarks/fingerprints.py --rows dcgan,ring8 --train_cycles 10
    python benchmarks/fingerprints.py --compare /tmp/before.json   # exit 1 when a fingerprint moved

A refactor that must not change what anything computes keeps every fingerprint: run the script
on the checkout before and after it, on the same machine, and compare. Each row is `run.py`
started as a user starts it (a process of its own, this script's Python, the checkout's
run.py, a fresh temporary --logdir) with --deterministic; its fingerprint is the hash of every
model variable that run.py prints when it finishes ("Finished at step N; weights fingerprint HEX",
`trainers.modes.train.fingerprint`). The rows: every `--setup` name the checkout's setup registry
serves (`trainers.setups.registry.names()`, read from the checkout, so a new preset gets a row),
the 2-D toys, and feature rows on the default preset that take other code paths. `distill` and
`dfad` need a teacher: a small domain evaluator is trained first (`--mode=train_evaluator`,
deterministic) into a temporary --evaluator_dir, unless `--evaluator_dir` names one.

Fingerprints depend on the CPU (its kernels, and `--precision=auto` trains in bfloat16 only where
the CPU computes it natively), so the script prints the CPU's bfloat16 flags: compare only runs
of one machine kind. A row that fails prints the tail of its stderr; the script then exits 1.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

# The flags of every row (the row's own come after them). --train_cycles and --checkpoint_every
# are added from --train_cycles: one checkpoint, at the end.
COMMON_FLAGS = ("--deterministic", "--image_every=0", "--histogram_every=0")
CYCLES_PER_LOOP = 10
# Per --setup name, what it needs to train offline (and fast); a name not listed trains with no
# more flags. CycleGAN's two ResNet generators at its preset's batch of 64 took 3 CPU minutes for
# 20 cycles, nearly half the CPU time of all rows; a batch of 16 takes the same code path.
CYCLEGAN_DOMAINS = ("--domain_a=fashion_mnist:Sneaker", "--domain_b=fashion_mnist:Ankle boot")
SETUP_FLAGS = {"cyclegan": (*CYCLEGAN_DOMAINS, "--batch_size=16")}
TEACHER_SETUPS = ("distill", "dfad")  # they distill the domain evaluator of --evaluator_dir
EVALUATOR_FLAG = "--evaluator_dir"  # its value is filled in when the row runs
EVALUATOR_FLAGS = ("--mode=train_evaluator", "--deterministic", "--evaluator_epochs=1",
                   "--evaluator_train_examples=2000")
TOY_ROWS = {"ring8": ("--setup=dcgan", "--dataset=ring8"), "grid25": ("--setup=dcgan", "--dataset=grid25")}
# Feature rows: the default preset (dcgan on Fashion-MNIST) through other code paths.
# --arch=resnet trains in float32: in bfloat16 its fingerprint changed from one process to the
# next (about one run in four on a CPU with AVX512-BF16). In a residual block the conv1 and
# shortcut biases read the same gradient, and one BiasAddGrad node is left for both; oneDNN's
# layout pass (MklLayoutRewritePass, its log at TF_CPP_VMODULE=mkl_layout_pass=1) fuses it with
# whichever of the two Conv2DBackpropFilter nodes it meets first, which varies per process, and
# the 3x3 and 1x1 primitives sum that gradient differently in bfloat16 (alike in float32).
FEATURE_ROWS = {
    "simultaneous": ("--update_order=simultaneous",),
    "dp": ("--dp_l2_clip=1", "--dp_noise_multiplier=1"),
    "ema": ("--ema_halflife_kimg=1",),
    "resnet": ("--arch=resnet", "--precision=float32"),
    "diffaugment": ("--diffaugment=color,translation", "--consistency_weight=1"),
    "mirrored": ("--strategy=mirrored", "--cpu_replicas=2"),
    "pack": ("--pack=2",),
}
CPU_FLAGS = ("avx512_bf16", "amx_bf16")
FINISHED = re.compile(r"^Finished at step (\d+); weights fingerprint ([0-9a-f]+)\s*$", re.MULTILINE)
STDERR_TAIL_LINES = 25
# trainers.api first: it declares the shared flags that the setups' presets are checked against.
NAMES_PROGRAM = ("import trainers.api; from trainers.setups import registry; "
                 "print('\\n'.join(registry.names()))")


@dataclasses.dataclass(frozen=True)
class Row:
    """One run: its name and its own flags (after COMMON_FLAGS); `teacher` when it needs
    --evaluator_dir."""

    name: str
    flags: tuple[str, ...]
    teacher: bool = False


@dataclasses.dataclass
class Result:
    row: Row
    cycles: int | None = None
    fingerprint: str | None = None
    seconds: float = 0.0
    error: str | None = None  # why the row failed: None when it succeeded


def registry_names(repo: str) -> tuple[str, ...]:
    """Every `--setup` name the setup registry of the checkout `repo` serves, in its order (from a
    process of its own, so the names are the checkout's whatever this script imported)."""
    result = subprocess.run([sys.executable, "-c", NAMES_PROGRAM], cwd=repo, env=environment(),
                            capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        raise RuntimeError(f"reading the --setup names from {repo}'s trainers.setups.registry "
                           f"failed:\n{tail(result.stderr)}")
    return tuple(line.strip() for line in result.stdout.splitlines() if line.strip())


def rows(names: tuple[str, ...]) -> list[Row]:
    """A row per registry name, then the toys, then the feature rows."""
    table = [Row(name, (f"--setup={name}", *SETUP_FLAGS.get(name, ())), teacher=name in TEACHER_SETUPS)
             for name in names]
    table += [Row(name, flags) for name, flags in TOY_ROWS.items()]
    table += [Row(name, flags) for name, flags in FEATURE_ROWS.items()]
    return table


def select(table: list[Row], patterns: str | None) -> list[Row]:
    """The rows whose name contains one of the comma-separated substrings (all when None)."""
    if not patterns:
        return table
    wanted = [pattern.strip() for pattern in patterns.split(",") if pattern.strip()]
    return [row for row in table if any(pattern in row.name for pattern in wanted)]


def run_flags(row: Row, train_cycles: int, logdir: str, evaluator_dir: str | None) -> list[str]:
    """run.py's flags for `row`."""
    flags = [*COMMON_FLAGS, f"--train_cycles={train_cycles}",
             f"--cycles_per_loop={min(CYCLES_PER_LOOP, train_cycles)}",
             f"--checkpoint_every={train_cycles}", *row.flags, f"--logdir={logdir}"]
    if row.teacher:
        flags.append(f"{EVALUATOR_FLAG}={evaluator_dir}")
    return flags


def parse_finished(stdout: str) -> tuple[int, str] | None:
    """(step, fingerprint) of run.py's last "Finished at step N; weights fingerprint HEX" line;
    None without one."""
    found = FINISHED.findall(stdout)
    if not found:
        return None
    step, fingerprint = found[-1]
    return int(step), fingerprint


def tail(text: str, lines: int = STDERR_TAIL_LINES) -> str:
    """The last `lines` lines of `text`, progress-bar redraws dropped."""
    kept = [line.rsplit("\r", 1)[-1] for line in text.split("\n")]
    return "\n".join([line for line in kept if line.strip()][-lines:])


def environment() -> dict[str, str]:
    """The rows' environment: never download (the data must be local), TensorFlow quiet."""
    env = dict(os.environ)
    env.setdefault("GANTRY_OFFLINE", "1")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return env


def run_py(repo: str, flags: list[str], timeout: float) -> subprocess.CompletedProcess:
    """`python run.py FLAGS` in `repo`, with this script's Python; output captured."""
    try:
        return subprocess.run([sys.executable, os.path.join(repo, "run.py"), *flags], cwd=repo,
                              env=environment(), capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as expired:
        stderr = expired.stderr or ""
        if isinstance(stderr, bytes):
            stderr = stderr.decode(errors="replace")
        return subprocess.CompletedProcess(expired.cmd, None, "",
                                           f"{stderr}\ntimed out after {timeout:g} s")


def train_row(repo: str, row: Row, train_cycles: int, workdir: str, evaluator_dir: str | None,
              timeout: float) -> Result:
    """Trains `row` in a fresh logdir under `workdir`; its cycles and fingerprint, or its error."""
    logdir = tempfile.mkdtemp(prefix=f"{row.name}.", dir=workdir)
    os.rmdir(logdir)  # run.py creates it: a fresh run, not a resumed one
    started = time.monotonic()
    result = run_py(repo, run_flags(row, train_cycles, logdir, evaluator_dir), timeout)
    seconds = time.monotonic() - started
    finished = parse_finished(result.stdout)
    if result.returncode != 0 or finished is None:
        status = "timed out" if result.returncode is None else f"exit code {result.returncode}"
        if result.returncode == 0:
            status = "no 'Finished at step N; weights fingerprint HEX' line"
        return Result(row, seconds=seconds, error=f"{status}\n{tail(result.stderr)}")
    cycles, fingerprint = finished
    if cycles != train_cycles:
        return Result(row, cycles, fingerprint, seconds,
                      error=f"finished at step {cycles}, not --train_cycles={train_cycles}\n"
                            f"{tail(result.stdout)}")
    return Result(row, cycles, fingerprint, seconds)


def train_teacher(repo: str, evaluator_dir: str, timeout: float) -> str | None:
    """Trains the small domain evaluator distill and dfad learn from; None, or its error."""
    result = run_py(repo, [*EVALUATOR_FLAGS, f"{EVALUATOR_FLAG}={evaluator_dir}"], timeout)
    if result.returncode != 0:
        return f"exit code {result.returncode}\n{tail(result.stderr)}"
    return None


def cpu_flags(path: str = "/proc/cpuinfo") -> str:
    """"CPU: MODEL; avx512_bf16 yes|no, amx_bf16 yes|no" (what fingerprints depend on)."""
    try:
        with open(path) as file:
            info = file.read()
    except OSError:
        return f"CPU: {path} unreadable; {', '.join(f'{flag} unknown' for flag in CPU_FLAGS)}"
    model = re.search(r"^model name\s*:\s*(.+)$", info, re.MULTILINE)
    listed = re.search(r"^flags\s*:(.*)$", info, re.MULTILINE)
    flags = set(listed.group(1).split()) if listed else set()
    present = ", ".join(f"{flag} {'yes' if flag in flags else 'no'}" for flag in CPU_FLAGS)
    return f"CPU: {model.group(1).strip() if model else 'unknown'}; {present}"


def shown_flags(row: Row) -> str:
    """The row's own flags as a shell would take them (--evaluator_dir's temporary path as DIR)."""
    flags = [*row.flags, *([f"{EVALUATOR_FLAG}=DIR"] if row.teacher else [])]
    return shlex.join(flags)


def table(results: list[Result], compared: dict[str, str | None] | None) -> str:
    """The markdown table: row, flags, cycles, fingerprint (and the comparison)."""
    header = ["row", "flags", "cycles", "fingerprint"] + (["before"] if compared is not None else [])
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    for result in results:
        cells = [result.row.name, f"`{shown_flags(result.row)}`",
                 "" if result.cycles is None else str(result.cycles),
                 result.fingerprint or "FAILED"]
        if compared is not None:
            cells.append(comparison(result, compared))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def comparison(result: Result, compared: dict[str, str | None]) -> str:
    before = compared.get(result.row.name)
    if result.row.name not in compared:
        return "new row"
    if result.error is not None or before is None:
        return "n/a"
    return "same" if before == result.fingerprint else f"DIFFERENT (was {before})"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", default=os.getcwd(), help="the checkout whose run.py trains "
                                                             "the rows (default: the current directory)")
    parser.add_argument("--rows", help="only the rows whose name contains one of these "
                                       "comma-separated substrings (e.g. 'dcgan,ring8')")
    parser.add_argument("--train_cycles", type=int, default=20, help="cycles per row")
    parser.add_argument("--json", help="write {row: fingerprint} here (null for a failed row)")
    parser.add_argument("--compare", help="a --json file of an earlier run: mark each row same or "
                                          "DIFFERENT, and exit 1 when one differs")
    parser.add_argument("--evaluator_dir", help="the teacher of distill and dfad: an evaluator "
                                                "directory already trained (default: train a small "
                                                "one into a temporary directory)")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per run.py process")
    parser.add_argument("--keep", action="store_true",
                        help="keep the temporary logdirs (and evaluator) and print where")
    args = parser.parse_args(argv)
    if args.train_cycles < 1:
        parser.error("--train_cycles must be >= 1")
    args.repo = os.path.abspath(args.repo)
    for needed in ("run.py", os.path.join("trainers", "setups", "registry.py")):
        if not os.path.isfile(os.path.join(args.repo, needed)):
            parser.error(f"{args.repo} is not a Gantry checkout (no {needed}): run from its root "
                         "or pass --repo")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    compared = None
    if args.compare:
        with open(args.compare) as file:
            compared = json.load(file)
    try:
        names = registry_names(args.repo)
    except RuntimeError as error:
        print(error, file=sys.stderr)
        return 1
    chosen = select(rows(names), args.rows)
    if not chosen:
        print(f"--rows={args.rows!r} matches no row of: {', '.join(row.name for row in rows(names))}",
              file=sys.stderr)
        return 2
    common = [*COMMON_FLAGS, f"--train_cycles={args.train_cycles}",
              f"--cycles_per_loop={min(CYCLES_PER_LOOP, args.train_cycles)}",
              f"--checkpoint_every={args.train_cycles}", "--logdir=TMP"]
    print(f"Repository: {args.repo}", flush=True)
    print(f"Python: {sys.executable}", flush=True)
    print(cpu_flags(), flush=True)
    print(f"Every row: run.py {shlex.join(common)} FLAGS", flush=True)

    workdir = tempfile.mkdtemp(prefix="fingerprints.")
    results: list[Result] = []
    try:
        evaluator_dir, teacher_error = args.evaluator_dir, None
        if any(row.teacher for row in chosen) and evaluator_dir is None:
            evaluator_dir = os.path.join(workdir, "evaluators")
            print(f"Training the teacher: run.py {shlex.join(EVALUATOR_FLAGS)} "
                  f"{EVALUATOR_FLAG}=DIR", flush=True)
            teacher_error = train_teacher(args.repo, evaluator_dir, args.timeout)
        for row in chosen:
            if row.teacher and teacher_error is not None:
                result = Result(row, error=f"the teacher (--mode=train_evaluator) failed: "
                                           f"{teacher_error}")
            else:
                result = train_row(args.repo, row, args.train_cycles, workdir, evaluator_dir,
                                   args.timeout)
            results.append(result)
            print(f"{row.name}: {result.fingerprint or 'FAILED'} ({result.seconds:.0f} s)", flush=True)
            if result.error is not None:
                print(f"  {row.name} failed: {result.error}".replace("\n", "\n    "), file=sys.stderr,
                      flush=True)
    finally:
        if args.keep:
            print(f"Logdirs kept in {workdir}", flush=True)
        else:
            shutil.rmtree(workdir, ignore_errors=True)

    print()
    print(table(results, compared), flush=True)
    if args.json:
        with open(args.json, "w") as file:
            json.dump({result.row.name: result.fingerprint if result.error is None else None
                       for result in results}, file, indent=1)
            file.write("\n")
    failed = [result.row.name for result in results if result.error is not None]
    different = [result.row.name for result in results if compared is not None
                 and comparison(result, compared).startswith("DIFFERENT")]
    if failed:
        print(f"FAILED: {', '.join(failed)}", flush=True)
    if different:
        print(f"DIFFERENT from {args.compare}: {', '.join(different)}", flush=True)
    return 1 if failed or different else 0


if __name__ == "__main__":
    sys.exit(main())
