"""`--init_from=LOGDIR[:STEP]` parsed and checked against the filesystem, before TensorFlow:
each fault is a ConfigError naming the flag; a resume does not look for the source."""

import dataclasses

import pytest

from trainers.config.flags import Config, ConfigError
from trainers.config.source_run import Source, check, parse
from trainers.setups import registry


@pytest.mark.parametrize("value, source", [
    ("runs/pre", Source("runs/pre", None)),
    ("runs/pre:400", Source("runs/pre", 400)),
    ("gs://bucket/run", Source("gs://bucket/run", None)),
    ("gs://bucket/run:12", Source("gs://bucket/run", 12)),
    ("runs/a:b", Source("runs/a:b", None)),
    (":7", Source(":7", None)),
])
def test_a_step_is_the_number_after_the_last_colon(value, source):
    assert parse(value) == source


@pytest.fixture
def trained(tmp_path):
    """A run directory with a config.json and kept checkpoints of steps 2 and 10."""
    logdir = tmp_path / "pre"
    (logdir / "checkpoints").mkdir(parents=True)
    (logdir / "config.json").write_text("{}")
    for step in (2, 10):
        for suffix in (".index", ".data-00000-of-00001"):
            (logdir / "checkpoints" / f"ckpt-{step}{suffix}").write_text("")
    (logdir / "checkpoints" / "checkpoint").write_text("")
    return logdir


def test_a_kept_step_or_the_newest_passes(trained):
    assert check(f"{trained}:10") == Source(str(trained), 10)
    assert check(str(trained)) == Source(str(trained), None)


@pytest.mark.parametrize("suffix, message", [
    ("/nothing", "nothing does not exist; name the --logdir of a trained run"),
    ("/checkpoints", "holds no Gantry run (it has no config.json)"),
    (":3", "keeps no checkpoint of step 3; its kept steps are 2, 10. Use one of them"),
])
def test_what_is_not_a_source_is_named(trained, suffix, message):
    with pytest.raises(ConfigError, match=r"^--init_from='.*': ") as error:
        check(f"{trained}{suffix}")
    assert message in str(error.value)


def test_a_run_without_checkpoints_is_refused(trained):
    for path in (trained / "checkpoints").iterdir():
        path.unlink()
    with pytest.raises(ConfigError, match="has no checkpoint yet"):
        check(str(trained))


def test_a_new_run_checks_its_source_and_a_resume_does_not(tmp_path):
    logdir = tmp_path / "run"
    config = Config(logdir=str(logdir), init_from=str(tmp_path / "gone"))
    with pytest.raises(ConfigError, match="^--init_from=.*gone does not exist"):
        registry.resolve(config)
    registry.resolve(config, recorded={})  # LOGDIR/config.json exists: the run resumes
    registry.resolve(dataclasses.replace(config, mode="sample"))  # only training reads it
