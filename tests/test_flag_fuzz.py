"""Property-based fuzzing of `run.py`'s flags (hypothesis).

Every flag is declared with its facts (`trainers.config.flags`), so the values are drawn from the declarations (type, help,
choices, path): a new flag is fuzzed without touching this file. Each example starts from a
tiny valid command (`BASE`: a 2-cycle ring8 or TINY Fashion-MNIST run; sample, eval, export and
plot read a copy of one such run) whose paths all lie in a fresh directory, which is also the
working directory, and replaces 1-3 flags by drawn values (half of them path flags, whose faults
need a path), in a mode their help names ("--mode=sample: ...") if it names one.

The property: `run.py` exits 0, or exits 2 with a message that names a `--flag`; never a
traceback, never another exit code; and a run that exits 2 leaves its run directory, export
directory and output file as they were (absent if they were).

How values are drawn, per field (`values`):
  bool   true or false;
  int    0, negatives, small positives and huge values (2**31 ... 10**30), but at most
         `COSTLY[name]` for a flag whose size is the work a run does (a huge one is a valid,
         long run, not a fault);
  float  0, -0, negatives, fractions, nan, +-inf, +-1e308;
  str    its choices (`Flag.choices`, or the registered --setup / --dataset
         names) three times in four; otherwise its help's "e.g." example, the empty string
         or junk text; and for a path (`Flag.path`, a `*dir` field, or one whose help
         says path, file, folder or directory) mostly a path of the fresh directory: missing,
         an existing directory, an existing junk file, or one under that file (`FILE/x.png`),
         ending in a suffix its help names (.png, .npy, .h5, ...); its junk text never
         leads out of the fresh directory (`_stays_inside`).

Profiles (hypothesis settings):
  ci    the default: 8 examples, derandomized (CI draws the same ones every time), no
        shrinking (a failure is reported as drawn, with its command line); about 60 s of
        one CPU.
  long  300 random examples, shrunk to a minimal command line; takes an hour or more:
            GANTRY_FUZZ_PROFILE=long .venv/bin/python -m pytest tests/test_flag_fuzz.py
        or, with pytest's option (`-p` registers the profiles before pytest loads one):
            .venv/bin/python -m pytest -p tests.test_flag_fuzz --hypothesis-profile=long \
                tests/test_flag_fuzz.py
Neither profile keeps an example database; hypothesis's own cache, .hypothesis/, git-ignores
itself.
"""

import dataclasses
import math
import os
import re
import shlex
import shutil
import subprocess
import tempfile

import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from datasets import registry as datasets
from tests import cli
from tests.cli import RUN_PY, TINY
from trainers.config.flags import declared
from trainers.setups import registry as setups

settings.register_profile("ci", max_examples=8, deadline=None, derandomize=True, database=None,
                          phases=(Phase.explicit, Phase.generate))
settings.register_profile("long", max_examples=300, deadline=None, database=None)
if settings.get_current_profile_name() == "default":
    settings.load_profile(os.environ.get("GANTRY_FUZZ_PROFILE", "ci"))

FIELDS = declared()
# The flag's type, as run.py reads it.
TYPES = {name: flag.type for name, flag in FIELDS.items()}
# Choices known only at run time (run.py lists --setup's the same way).
RUNTIME_CHOICES = {"setup": setups.names(),
                   "dataset": tuple(name.replace("<name>", "mnist") for name in datasets.KNOWN_NAMES)}
# The largest value drawn for a flag that sets how much work a run does.
COSTLY = {"train_cycles": 6, "d_updates": 4, "g_updates": 4, "batch_size": 64, "latent_dim": 32,
          "g_width": 16, "d_width": 16, "g_extra_blocks": 2, "d_extra_blocks": 2, "num_samples": 64,
          "eval_samples": 256, "evaluator_epochs": 2, "evaluator_train_examples": 256,
          "shuffle_buffer": 1024, "interpolate": 8}
TIMEOUT = 600  # seconds: a run taking longer than this is reported as hanging

# The tiny valid command: tests.cli's TINY flags, small budgets for every mode, then the mode's
# own flags. {dir} is the example's fresh directory; every mode but train finds a copy of a
# finished run of the same flags (`trained_run`) in {dir}/run.
BASE = {**dict(flag[2:].split("=", 1) for flag in TINY), "train_cycles": "2", "image_every": "0",
        "histogram_every": "0", "num_samples": "4", "eval_samples": "16", "evaluator_epochs": "1",
        "evaluator_train_examples": "64", "evaluator_dir": "{dir}/evaluators",
        "output": "{dir}/out.png"}
BASE_DATASETS = ("ring8", "fashion_mnist")
MODES = {"train": {"logdir": "{dir}/run"},
         "sample": {"logdir": "{dir}/run"},
         "eval": {"logdir": "{dir}/run"},
         "export": {"logdir": "{dir}/run", "export_dir": "{dir}/export"},
         "plot": {"logdir": "{dir}/run"}}

_PATH_WORDS = re.compile(r"\b(path|file|files|folder|director(y|ies))\b", re.IGNORECASE)
_SUFFIX = re.compile(r"(?<![\w.])\.[a-z][a-z0-9]*\b")
_EXAMPLE = re.compile(r"e\.g\. ([^\s)]+)")
_MODE = re.compile(r"--mode=(\w+)")
_JUNK = st.one_of(
    st.sampled_from(["", " ", "-", "-1", "0", "none", "true", "..", "../..", "/", "a" * 300,
                     "x,y", "%s{}", "--mode=train", "é☃"]),
    st.text(st.characters(exclude_categories=("Cs", "Cc")), max_size=12))
_NON_POSITIVE = st.one_of(st.just(0), st.integers(-3, -1), st.sampled_from([-2**31, -2**63]))
_INTS = st.one_of(_NON_POSITIVE, st.integers(1, 8),
                  st.sampled_from([2**31 - 1, 2**31, 2**63 - 1, 2**64, 10**30]))
_FLOATS = st.one_of(
    st.sampled_from([0.0, -0.0, -1.0, 0.5, 1.0, 2.0, 1e-300, 1e308, -1e308, math.nan, math.inf,
                     -math.inf]),
    st.floats(-4, 4))


@dataclasses.dataclass(frozen=True)
class DrawnPath:
    """A path of the example's directory, made when the example runs (`make`)."""
    kind: str  # missing, directory, file, under_file
    suffix: str

    def make(self, directory: str, name: str) -> str:
        path = os.path.join(directory, "drawn", name + self.suffix)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if self.kind == "directory":
            os.makedirs(path)
        elif self.kind in ("file", "under_file"):
            with open(path, "wb") as junk:
                junk.write(b"not what the flag expects\n")
        return os.path.join(path, "x" + self.suffix) if self.kind == "under_file" else path


def is_path(name: str) -> bool:
    """A field marked as a path (metadata "path"), or a text field named *dir or whose help
    says it is a path, file, folder or directory."""
    return bool(FIELDS[name].path) or TYPES[name] is str and (
        name.endswith("dir") or _PATH_WORDS.search(FIELDS[name].help) is not None)


# Path flags are picked as often as all the others together: their faults need a path drawn.
PATHS = sorted(name for name in FIELDS if is_path(name))


def values(name: str) -> st.SearchStrategy:
    """What --name is set to: a value of its type (see the module docstring)."""
    kind, help_text = TYPES[name], FIELDS[name].help
    if kind is bool:
        return st.booleans()
    if kind is int:
        return st.one_of(_NON_POSITIVE, st.integers(1, COSTLY[name])) if name in COSTLY else _INTS
    if kind is float:
        return _FLOATS
    examples = [example.rstrip(".,;") for example in _EXAMPLE.findall(help_text)]
    other = st.one_of(st.sampled_from(examples), _JUNK) if examples else _JUNK
    if is_path(name):
        suffixes = sorted(set(_SUFFIX.findall(help_text))) + [""]
        paths = st.builds(DrawnPath, st.sampled_from(["missing", "directory", "file", "under_file"]),
                          st.sampled_from(suffixes))
        return _mostly(paths, other.filter(_stays_inside))
    choices = FIELDS[name].choices or RUNTIME_CHOICES.get(name, ())
    return _mostly(st.sampled_from(choices), other) if choices else other


def _stays_inside(path: str) -> bool:
    """Whether a relative path stays in the working directory: a run may write where a path
    flag points, so drawn paths never leave the example's fresh directory."""
    return not os.path.isabs(path) and os.path.normpath(path or ".").split(os.sep)[0] != ".."


def _mostly(usual: st.SearchStrategy, rare: st.SearchStrategy) -> st.SearchStrategy:
    """`usual` three times in four."""
    return st.integers(0, 3).flatmap(lambda n: usual if n else rare)


def _text(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value) if isinstance(value, float) else str(value)


def _state(path: str):
    """What `path` holds now: None (absent), a file's size and mtime, or a directory's tree."""
    if not os.path.lexists(path):
        return None
    if not os.path.isdir(path):
        return os.lstat(path).st_size, os.lstat(path).st_mtime_ns
    tree = {".": "directory"}
    for root, dirs, files in os.walk(path):
        for entry in dirs + files:
            child = os.path.join(root, entry)
            tree[os.path.relpath(child, path)] = "directory" if entry in dirs else _state(child)
    return tree


def _targets(flags: dict[str, str], directory: str) -> dict[str, str]:
    """The run directory, export directory and output file these flags write."""
    logdir = flags.get("logdir", FIELDS["logdir"].default)
    export_dir = flags.get("export_dir") or os.path.join(logdir, "export")
    output = flags.get("output", FIELDS["output"].default)
    return {flag: os.path.join(directory, path)  # absolute paths stay as they are
            for flag, path in (("logdir", logdir), ("export_dir", export_dir), ("output", output))}


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory):
    """`trained_run(dataset)`: a finished base run of `dataset` (trained on first use) for
    sample, eval, export and plot."""
    made = {}

    def make(dataset: str) -> str:
        if dataset not in made:
            directory = str(tmp_path_factory.mktemp(f"fuzz_{dataset}"))
            flags = {**BASE, "dataset": dataset, "logdir": f"{directory}/run"}
            result = cli.run(*(f"--{name}={value.format(dir=directory)}"
                               for name, value in flags.items()), cwd=directory, timeout=TIMEOUT)
            assert result.returncode == 0, result.stderr[-3000:]
            made[dataset] = f"{directory}/run"
        return made[dataset]

    return make


@given(data=st.data())
def test_any_flags_exit_0_or_2_naming_a_flag_and_leave_nothing_behind(trained_run, data):
    names = data.draw(st.lists(st.one_of(st.sampled_from(PATHS), st.sampled_from(sorted(FIELDS))),
                               min_size=1, max_size=3, unique=True), label="perturbed flags")
    dataset = data.draw(st.sampled_from(BASE_DATASETS), label="base dataset")
    # A flag whose help names the modes that read it ("--mode=sample: ...") is tried in those.
    named = sorted({mode for name in names for mode in _MODE.findall(FIELDS[name].help)
                    if mode in MODES})
    mode = data.draw(st.sampled_from(named or sorted(MODES)), label="base mode")
    drawn = data.draw(st.fixed_dictionaries({name: values(name) for name in names}), label="values")
    with tempfile.TemporaryDirectory() as directory:
        if mode != "train":
            shutil.copytree(trained_run(dataset), f"{directory}/run")
        flags = {name: value.format(dir=directory)
                 for name, value in {**BASE, "dataset": dataset, "mode": mode, **MODES[mode]}.items()}
        for name, value in drawn.items():
            flags[name] = value.make(directory, name) if isinstance(value, DrawnPath) else _text(value)
        targets = _targets(flags, directory)
        before = {flag: _state(path) for flag, path in targets.items()}
        command = [*RUN_PY, *(f"--{name}={value}" for name, value in flags.items())]
        try:
            result = cli.run(*command[len(RUN_PY):], cwd=directory,
                             env={"XDG_CACHE_HOME": directory}, timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            pytest.fail(f"still running after {TIMEOUT} s: {shlex.join(command)}")
        report = (f"\n$ {shlex.join(command)}\n(cwd {directory})\nexit {result.returncode}; "
                  f"stderr:\n{result.stderr[-3000:]}")
        assert "Traceback (most recent call last)" not in result.stderr, report
        assert result.returncode in (0, 2), report
        if result.returncode == 2:
            assert any(f"--{name}" in result.stderr for name in [*FIELDS, "flagfile"]), report
            changed = [f"--{flag}={targets[flag]}" for flag in targets
                       if _state(targets[flag]) != before[flag]]
            assert not changed, f"exit 2 changed {', '.join(changed)}{report}"
