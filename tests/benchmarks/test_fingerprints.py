"""`benchmarks/fingerprints.py`: a row per `--setup` name of the registry plus the toys and the
feature rows, each with flags run.py defines; run.py's last line parsed; a failing row reported
with its stderr and exit code 1.

The end-to-end cases run the script as a user does, against a fake checkout (`--repo`) whose
run.py prints what a real one would in no time, so the script's flow (teacher first, a logdir
per row, the table, --json, --compare) is tested without training; one real ring8 row of two
cycles (~10 s) checks that the real run.py's line is what the script parses.
"""

import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

import run
from benchmarks import fingerprints
from tests.cli import ENV, ROOT
from trainers.setups import registry

SCRIPT = os.path.join(ROOT, "benchmarks", "fingerprints.py")
FAKE_RUN_PY = '''
import hashlib, os, sys
flags = dict(arg[2:].partition("=")[::2] for arg in sys.argv[1:])
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "calls.txt"), "a") as file:
    file.write(repr(sys.argv[1:]) + "\\n")
if flags.get("mode") == "train_evaluator":
    os.makedirs(flags["evaluator_dir"])
    sys.exit(0)
if flags.get("setup") == "broken":
    print("Traceback (most recent call last):\\nValueError: the broken setup broke", file=sys.stderr)
    sys.exit(1)
if flags.get("setup") == "distill" and not os.path.isdir(flags.get("evaluator_dir", "")):
    sys.exit("no teacher")
os.makedirs(flags["logdir"])
print("step 1 d_loss=1.0")
settings = sorted((name, value) for name, value in flags.items() if name != "logdir")
print(f"Finished at step {flags['train_cycles']}; weights fingerprint "
      + hashlib.sha256(repr(settings).encode()).hexdigest()[:16])
'''


def row_names(table):
    return [row.name for row in table]


def flag_names(flags):
    return [flag[2:].partition("=")[0] for flag in flags]


def test_a_row_per_registry_name_then_the_toys_and_the_feature_rows():
    names = fingerprints.registry_names(ROOT)
    assert names == registry.names() and "dcgan" in names and "dfad" in names
    table = fingerprints.rows(names)
    assert row_names(table) == [*names, "ring8", "grid25", *fingerprints.FEATURE_ROWS]
    assert len(set(row_names(table))) == len(table)
    by_name = {row.name: row for row in table}
    for name in names:
        assert by_name[name].flags[0] == f"--setup={name}"
        assert by_name[name].teacher == (name in ("distill", "dfad"))
    assert by_name["ring8"].flags == ("--setup=dcgan", "--dataset=ring8")
    assert by_name["grid25"].flags == ("--setup=dcgan", "--dataset=grid25")
    # In bfloat16 its fused bias gradients change from one process to the next.
    assert "--precision=float32" in by_name["resnet"].flags
    # One argument each, the class name with its space, as run.py's tests pass them.
    assert {"--domain_a=fashion_mnist:Sneaker", "--domain_b=fashion_mnist:Ankle boot"} <= set(
        by_name["cyclegan"].flags)
    new_preset = fingerprints.rows(("dcgan", "new_preset"))[1]
    assert new_preset == fingerprints.Row("new_preset", ("--setup=new_preset",))


def test_every_flag_the_script_passes_is_one_run_py_defines():
    table = fingerprints.rows(registry.names())
    used = {name for row in table
            for name in flag_names(fingerprints.run_flags(row, 20, "/tmp/x", "/tmp/e"))}
    used |= set(flag_names(fingerprints.EVALUATOR_FLAGS))
    assert {"deterministic", "train_cycles", "logdir", "evaluator_dir", "cpu_replicas"} <= used
    assert sorted(name for name in used if name not in run.FLAGS) == []


def test_run_flags_give_each_row_its_cycles_one_checkpoint_and_its_teacher():
    distill = fingerprints.Row("distill", ("--setup=distill",), teacher=True)
    flags = fingerprints.run_flags(distill, 20, "/tmp/run", "/tmp/teacher")
    assert flags[0] == "--deterministic"
    assert {"--train_cycles=20", "--cycles_per_loop=10", "--checkpoint_every=20", "--setup=distill",
            "--logdir=/tmp/run", "--evaluator_dir=/tmp/teacher"} <= set(flags)
    assert "--cycles_per_loop=5" in fingerprints.run_flags(distill, 5, "/tmp/run", "/tmp/teacher")
    assert not any(flag.startswith("--evaluator_dir") for flag in fingerprints.run_flags(
        fingerprints.Row("dcgan", ("--setup=dcgan",)), 20, "/tmp/run", "/tmp/teacher"))


def test_the_finished_line_is_parsed_and_its_absence_noticed():
    stdout = ("step 20/20 d_loss=1.3047 g_loss=0.6335 478 img/s left 0:00\n"
              "Finished at step 20; weights fingerprint 62968f920828608f\n")
    assert fingerprints.parse_finished(stdout) == (20, "62968f920828608f")
    assert fingerprints.parse_finished("Run in x already finished at step 20\n") is None
    assert fingerprints.parse_finished("") is None


def test_rows_filter_by_any_of_the_substrings():
    table = fingerprints.rows(("dcgan", "wgan", "wgan_gp", "cgan"))
    assert row_names(fingerprints.select(table, "wgan")) == ["wgan", "wgan_gp"]
    assert row_names(fingerprints.select(table, "ring8, pack")) == ["ring8", "pack"]
    assert fingerprints.select(table, None) == table


def test_the_cpu_line_says_which_bfloat16_flags_the_cpu_has(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("model name\t: Some CPU\nflags\t\t: fpu avx512f avx512_bf16 sse\n")
    assert fingerprints.cpu_flags(str(cpuinfo)) == "CPU: Some CPU; avx512_bf16 yes, amx_bf16 no"


@pytest.fixture
def fake_checkout(tmp_path):
    """A checkout whose registry serves dcgan, distill and broken (beside an empty trainers.api,
    which the script imports first), and whose run.py answers at once: a fingerprint of its
    flags, or (broken) a traceback and exit code 1."""
    repo = tmp_path / "checkout"
    (repo / "trainers" / "setups").mkdir(parents=True)
    for package in ("trainers", "trainers/setups"):
        (repo / package / "__init__.py").write_text("")
    (repo / "trainers" / "setups" / "registry.py").write_text(
        "def names():\n    return ('dcgan', 'distill', 'broken')\n")
    (repo / "trainers" / "api.py").write_text("")  # imported first: it declares the flags
    (repo / "run.py").write_text(textwrap.dedent(FAKE_RUN_PY))
    return repo


def fingerprints_py(*args, cwd):
    return subprocess.run([sys.executable, SCRIPT, *args], cwd=cwd, env=ENV, capture_output=True,
                          text=True, timeout=120)


def table_rows(stdout):
    cells = lambda line: [cell.strip() for cell in line.strip().strip("|").split("|")]  # noqa: E731
    lines = [line for line in stdout.splitlines()
             if line.startswith("| ") and not line.startswith(("| row |", "| --- |"))]
    return {cells(line)[0]: cells(line) for line in lines}


def test_a_failing_row_prints_its_stderr_and_the_script_exits_1(fake_checkout, tmp_path):
    out = tmp_path / "fingerprints.json"
    result = fingerprints_py("--rows=dcgan,distill,broken,ring8", f"--json={out}", cwd=fake_checkout)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "broken failed: exit code 1" in result.stderr
    assert "ValueError: the broken setup broke" in result.stderr
    assert "FAILED: broken" in result.stdout
    assert re.search(r"avx512_bf16 (yes|no), amx_bf16 (yes|no)", result.stdout)
    rows = table_rows(result.stdout)
    assert list(rows) == ["dcgan", "distill", "broken", "ring8"]
    assert rows["broken"][2:] == ["", "FAILED"]
    assert rows["distill"][1] == "`--setup=distill --evaluator_dir=DIR`"
    assert all(rows[name][2] == "20" and re.fullmatch(r"[0-9a-f]{16}", rows[name][3])
               for name in ("dcgan", "distill", "ring8"))
    recorded = json.loads(out.read_text())
    assert recorded == {"dcgan": rows["dcgan"][3], "distill": rows["distill"][3], "broken": None,
                        "ring8": rows["ring8"][3]}
    calls = [eval(line) for line in (fake_checkout / "calls.txt").read_text().splitlines()]
    assert "--mode=train_evaluator" in calls[0]  # the teacher first, then a fresh logdir per row
    logdirs = [flag for call in calls[1:] for flag in call if flag.startswith("--logdir=")]
    assert len(set(logdirs)) == 4 and not any(os.path.exists(flag[9:]) for flag in logdirs)


def test_compare_marks_a_moved_fingerprint_and_exits_1(fake_checkout, tmp_path):
    before = tmp_path / "before.json"
    assert fingerprints_py("--rows=dcgan,ring8", f"--json={before}", cwd=fake_checkout).returncode == 0
    same = fingerprints_py("--rows=dcgan,ring8", f"--compare={before}", cwd=fake_checkout)
    assert same.returncode == 0 and [row[-1] for row in table_rows(same.stdout).values()] == ["same"] * 2
    recorded = json.loads(before.read_text())
    before.write_text(json.dumps({**recorded, "dcgan": "0" * 16}))
    moved = fingerprints_py("--rows=dcgan,ring8", f"--compare={before}", cwd=fake_checkout)
    assert moved.returncode == 1
    assert table_rows(moved.stdout)["dcgan"][-1] == f"DIFFERENT (was {'0' * 16})"
    assert f"DIFFERENT from {before}: dcgan" in moved.stdout


def test_rows_matching_nothing_and_a_directory_that_is_no_checkout_are_refused(fake_checkout, tmp_path):
    nothing = fingerprints_py("--rows=nonesuch", cwd=fake_checkout)
    assert nothing.returncode == 2 and "matches no row of: dcgan, distill, broken" in nothing.stderr
    elsewhere = fingerprints_py(cwd=tmp_path)
    assert elsewhere.returncode == 2 and "is not a Gantry checkout (no run.py)" in elsewhere.stderr


def test_a_real_ring8_row_is_fingerprinted(tmp_path):
    out = tmp_path / "ring8.json"
    result = fingerprints_py("--rows=ring8", "--train_cycles=2", f"--json={out}", f"--repo={ROOT}",
                             cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    row = table_rows(result.stdout)["ring8"]
    assert row[1:3] == ["`--setup=dcgan --dataset=ring8`", "2"]
    assert re.fullmatch(r"[0-9a-f]{16}", row[3]) and json.loads(out.read_text()) == {"ring8": row[3]}
