"""A script forked from the warm interpreter (`tests.warm_start`) behaves as the same command
started cold: output, exit code, traceback, working directory, arguments, environment,
`sys.path`, exit handlers; its random state is its own; it can be timed out and killed."""

import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

from tests import cli
from tests.warm_start import WarmStarter

SCRIPT = textwrap.dedent("""
    import atexit, json, os, random, sys
    import numpy
    atexit.register(lambda: print("exit handler ran"))
    print(json.dumps({"argv": sys.argv[1:], "cwd": os.getcwd(), "path0": sys.path[0],
                      "name": __name__, "variable": os.environ.get("GANTRY_PROBE"),
                      "stdin": sys.stdin.read(), "draws": [random.random(), numpy.random.rand()]}))
    print("to stderr", file=sys.stderr)
    if sys.argv[1] == "raise":
        raise ValueError("raised on purpose")
    sys.exit(int(sys.argv[1]))
""")


@pytest.fixture(scope="module")
def starter():
    starter = WarmStarter(cwd=cli.ROOT, env=cli.ENV)
    yield starter
    starter.close()


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "probe.py"
    path.write_text(SCRIPT)
    (tmp_path / "work").mkdir()
    return str(path)


def warm(starter, script, *args, env=None):
    """The script run warm to its end: (return code, stdout, stderr)."""
    where = os.path.dirname(script)
    out, err = os.path.join(where, "out"), os.path.join(where, "err")
    process = starter.popen([script, *args], os.path.join(where, "work"),
                            {**cli.ENV, **(env or {})}, out, err)
    code = process.wait(timeout=60)
    with open(out) as stdout, open(err) as stderr:
        return code, stdout.read(), stderr.read()


def cold(script, *args, env=None):
    result = subprocess.run([sys.executable, script, *args],
                            cwd=os.path.join(os.path.dirname(script), "work"),
                            env={**cli.ENV, **(env or {})}, stdin=subprocess.DEVNULL,
                            capture_output=True, text=True, timeout=60)
    return result.returncode, result.stdout, result.stderr


def report(stdout: str) -> dict:
    """What the script printed of itself (its first line)."""
    return json.loads(stdout.splitlines()[0])


@pytest.mark.parametrize("args", [("0", "x"), ("3",), ("raise",)])
def test_a_warm_run_matches_a_cold_one(starter, script, args):
    env = {"GANTRY_PROBE": "set for this run"}
    warm_code, warm_out, warm_err = warm(starter, script, *args, env=env)
    cold_code, cold_out, cold_err = cold(script, *args, env=env)
    assert warm_code == cold_code == {"0": 0, "3": 3, "raise": 1}[args[0]]
    warm_report, cold_report = report(warm_out), report(cold_out)
    del warm_report["draws"], cold_report["draws"]
    assert warm_report == cold_report
    assert warm_report == {"argv": list(args), "cwd": os.path.join(os.path.dirname(script), "work"),
                           "path0": os.path.dirname(script), "name": "__main__",
                           "variable": "set for this run", "stdin": ""}
    assert warm_out.splitlines()[1:] == cold_out.splitlines()[1:] == ["exit handler ran"]
    if args[0] == "raise":
        assert warm_err.startswith("to stderr\nTraceback (most recent call last):")
        assert warm_err.endswith("ValueError: raised on purpose\n")
        assert cold_err.endswith("ValueError: raised on purpose\n")
    else:
        assert warm_err == cold_err == "to stderr\n"


def test_each_warm_run_draws_its_own_random_numbers(starter, script):
    (python_first, numpy_first), (python_second, numpy_second) = (
        report(warm(starter, script, "0")[1])["draws"] for _ in range(2))
    assert python_first != python_second
    assert numpy_first != numpy_second


def test_a_warm_run_times_out_and_is_killed(starter, tmp_path):
    sleeper = tmp_path / "sleeper.py"
    sleeper.write_text("import time\ntime.sleep(600)\n")
    process = starter.popen([str(sleeper)], str(tmp_path), cli.ENV, str(tmp_path / "out"),
                            str(tmp_path / "err"))
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        process.wait(timeout=1)
    assert 1 <= time.monotonic() - started < 10
    assert process.poll() is None
    process.kill()
    assert process.wait(timeout=30) == -9


def test_run_py_fails_a_bad_flag_warm_exactly_as_cold(tmp_path):
    warm_result = cli.run("--mode=bogus", f"--logdir={tmp_path}")
    cold_result = subprocess.run([*cli.RUN_PY, "--mode=bogus", f"--logdir={tmp_path}"],
                                 cwd=cli.ROOT, env=cli.ENV, capture_output=True, text=True,
                                 timeout=120)
    assert warm_result.returncode == cold_result.returncode == 2
    assert warm_result.stderr == cold_result.stderr
    assert warm_result.stderr.startswith("error: --mode='bogus' is invalid")
