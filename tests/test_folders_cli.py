"""`--dataset=folder:PATH` end to end: folders of PNGs the tests write, trained through run.py
(cgan on class sub-folders, dcgan on a folder without classes, cyclegan between two folders),
then sampled, evaluated and exported in-process (the CLI paths of those modes are covered by
test_run, test_eval_cli and test_conditional_cli) except `--label=<name>`, a folder's class.

The domain evaluator of the class folder is trained in-process by --mode=train_evaluator's
function; the folders without classes are scored with a small `.keras` feature model.
"""

import json

import keras
import numpy as np
import pytest

from tests.cli import TINY, TINY_TRANSLATION, run
from tests.image_folders import write_folder
from trainers.config.flags import Config, ConfigError
from trainers.modes import evaluate, export, sample, train_evaluator
from trainers.setups import registry

TRAIN = [*TINY, "--train_cycles=2", "--checkpoint_every=2", "--image_every=2",
         "--histogram_every=0"]


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """classes/ (circle, square: 12 RGB 32 px PNGs each), plain/ (16 gray 28 px), rgb/ (16 RGB
    28 px), and feature.keras, a feature model of 28 px grayscale images."""
    base = tmp_path_factory.mktemp("folders")
    write_folder(str(base / "classes"), {"circle": 12, "square": 12})
    write_folder(str(base / "plain"), 16, side=28, channels=1)
    write_folder(str(base / "rgb"), 16, side=28, channels=3)
    images = keras.Input((28, 28, 1))
    features = keras.layers.Dense(8, name="features")(keras.layers.Flatten()(images))
    keras.Model(images, keras.layers.Dense(3)(features)).save(base / "feature.keras")
    return base


@pytest.fixture(scope="module")
def cgan_run(root):
    """The class folder's domain evaluator (--mode=train_evaluator), then a cgan run scored by
    it every 2 cycles."""
    cache = root / "evaluators"
    loaded = train_evaluator.train_domain_evaluator(Config(
        mode="train_evaluator", dataset=f"folder:{root / 'classes'}", evaluator_dir=str(cache),
        evaluator_epochs=1))
    logdir = root / "cgan"
    result = run(*TRAIN, "--setup=cgan", f"--dataset=folder:{root / 'classes'}", f"--logdir={logdir}",
                 "--eval_every=2", "--eval_samples=24", f"--evaluator_dir={cache}")
    assert result.returncode == 0, result.stderr[-3000:]
    return logdir, cache, loaded


def test_train_evaluator_learns_the_folder_classes(cgan_run, root):
    _, cache, loaded = cgan_run
    record = loaded.record
    assert (record["num_classes"], record["input_shape"]) == (2, [32, 32, 3])
    assert loaded.directory.startswith(str(cache / "folder_classes_"))
    assert loaded.directory.endswith("-32")


def test_cgan_trains_on_the_class_folders_and_samples_a_class_by_name(cgan_run, tmp_path):
    logdir, cache, _ = cgan_run
    best = json.loads((logdir / "checkpoints_best" / "best.json").read_text())
    assert best["step"] == 2 and len(best["intra_fid_per_class_domain"]) == 2
    result = run("--mode=sample", f"--logdir={logdir}", "--label=Square", "--num_samples=3",
                 "--seed=4", f"--output={tmp_path / 'square.npy'}")
    assert result.returncode == 0, result.stderr[-2000:]
    by_name = np.load(tmp_path / "square.npy")
    assert by_name.shape == (3, 32, 32, 3) and by_name.dtype == np.uint8
    sample.sample(Config(mode="sample", logdir=str(logdir), label="1", num_samples=3, seed=4,
                         output=str(tmp_path / "one.npy")))
    np.testing.assert_array_equal(np.load(tmp_path / "one.npy"), by_name)


def test_cgan_evaluates_and_exports_with_the_class_names(cgan_run, tmp_path):
    logdir, cache, _ = cgan_run
    results = evaluate.evaluate(Config(mode="eval", logdir=str(logdir), eval_samples=24,
                                       evaluator_dir=str(cache)))
    best = json.loads((logdir / "checkpoints_best" / "best.json").read_text())
    assert results["intra_fid_per_class_domain"] == pytest.approx(
        best["intra_fid_per_class_domain"])
    assert results["class_accuracy_domain"] == pytest.approx(best["class_accuracy_domain"])
    exported = export.export(Config(mode="export", logdir=str(logdir), export_dir=str(tmp_path)))
    metadata = json.loads((tmp_path / "generator" / "2" / "export.json").read_text())
    assert exported.step == 2 and metadata["class_names"] == ["circle", "square"]


@pytest.fixture(scope="module")
def plain_run(root):
    """dcgan on the grayscale folder without classes, scored every 2 cycles by feature.keras."""
    logdir = root / "plain_run"
    result = run(*TRAIN, f"--dataset=folder:{root / 'plain'}", f"--logdir={logdir}",
                 "--eval_every=2", "--eval_samples=16", f"--evaluator={root / 'feature.keras'}")
    assert result.returncode == 0, result.stderr[-3000:]
    return logdir


def test_a_folder_without_classes_trains_samples_evaluates_and_exports(plain_run, root, tmp_path):
    best = json.loads((plain_run / "checkpoints_best" / "best.json").read_text())
    assert best["step"] == 2 and "fid_custom" in best
    config = Config(mode="eval", logdir=str(plain_run), eval_samples=16,
                    evaluator=str(root / "feature.keras"))
    assert evaluate.evaluate(config)["fid_custom"] == pytest.approx(best["fid_custom"])
    assert sample.sample(Config(mode="sample", logdir=str(plain_run), num_samples=5,
                                output=str(tmp_path / "s.npy"))).count == 5
    assert np.load(tmp_path / "s.npy").shape == (5, 28, 28, 1)
    assert export.export(Config(mode="export", logdir=str(plain_run),
                                export_dir=str(tmp_path))).step == 2


def test_without_classes_the_domain_evaluator_is_refused(plain_run, root):
    message = "has no class labels, so it has no domain evaluator"
    with pytest.raises(ConfigError, match=message):
        evaluate.evaluate(Config(mode="eval", logdir=str(plain_run), eval_samples=16))
    with pytest.raises(ConfigError, match=message + r".*--evaluator=inception \(the standard FID network\)"):
        train_evaluator.train_domain_evaluator(Config(mode="train_evaluator",
                                                      dataset=f"folder:{root / 'plain'}"))


def test_cyclegan_translates_between_two_folders(root, tmp_path):
    logdir = root / "cyclegan"
    result = run(*TINY_TRANSLATION, "--train_cycles=2", "--checkpoint_every=2", "--histogram_every=0",
                 "--setup=cyclegan", "--batch_size=4", f"--domain_a=folder:{root / 'plain'}",
                 f"--domain_b=folder:{root / 'rgb'}", "--channels=1", "--image_every=0",
                 f"--logdir={logdir}")
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads((logdir / "config.json").read_text())["channels"] == 1
    assert sample.sample(Config(mode="sample", logdir=str(logdir), num_samples=3,
                                output=str(tmp_path / "t.npy"))).count == 3
    assert np.load(tmp_path / "t.npy").shape == (3, 28, 28, 1)
    results = evaluate.evaluate(Config(mode="eval", logdir=str(logdir), eval_samples=10,
                                       evaluator=str(root / "feature.keras")))
    assert results["ab"]["num_samples"] == results["ba"]["num_samples"] == 10


def test_a_bad_folder_stops_the_run_before_the_logdir_is_written(tmp_path):
    """Every folder error is raised by the scan behind `dataset_info` (messages:
    tests/datasets/test_folders.py), which training runs before it writes anything."""
    missing, logdir = tmp_path / "no_such_folder", tmp_path / "run"
    result = run(*TRAIN, f"--dataset=folder:{missing}", f"--logdir={logdir}")
    assert result.returncode == 2
    assert f"error: --dataset='folder:{missing}': {missing} does not exist" in result.stderr
    assert "Traceback" not in result.stderr and not logdir.exists()


def test_a_folder_of_unsupported_size_names_the_supported_resolutions(root, tmp_path):
    write_folder(str(tmp_path / "odd"), 2, side=30)
    config = Config(dataset=f"folder:{tmp_path / 'odd'}")
    setup = registry.get(config.setup)
    with pytest.raises(ConfigError, match=r"--resolution=30 .* is not supported"):
        setup.check_data(config, setup.dataset_info(config))
