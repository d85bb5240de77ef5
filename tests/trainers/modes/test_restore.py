"""A run directory rebuilds without its data: a cgan run on a folder of class sub-folders, trained
in-process, samples a class by name and exports the same after its folder is deleted, from
LOGDIR/dataset.json; eval then says it needs the images; a resume on a changed folder is
refused. (Old runs without the record: tests/test_old_runs.py.)"""

import json
import shutil

import numpy as np
import pytest
import tensorflow as tf

from datasets.errors import DatasetError
from tests.image_folders import write_folder
from trainers import api
from trainers.config.flags import Config
from trainers.config.record import RUN_RECORD_FILE
from trainers.modes import evaluate, export, restore, sample
from trainers.setups import registry

CLASSES = {"circle": 4, "square": 4}
NOISE = tf.random.stateless_normal([3, 8], seed=[5, 6])


def outputs(logdir, where):
    """What the run gives: samples of the class "square" by name, and its export's metadata and
    images for NOISE (the export written under `where`)."""
    sample.sample(Config(mode="sample", logdir=str(logdir), label="square", num_samples=3, seed=4,
                         output=str(where / "square.npy")))
    exported = export.export(Config(mode="export", logdir=str(logdir), export_dir=str(where)))
    metadata = json.loads((where / "generator" / "2" / "export.json").read_text())
    served = tf.saved_model.load(exported.path).signatures["serving_default"]
    images = served(noise=NOISE, labels=tf.constant([0, 1, 1]))["images"].numpy()
    return np.load(where / "square.npy"), {**metadata, "checkpoint": None}, images


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """(folder, logdir, outputs before the folder goes) of a 2-cycle cgan run on 28 px PNGs."""
    base = tmp_path_factory.mktemp("record")
    folder = write_folder(str(base / "shapes"), CLASSES, side=28)
    config = api.config(setup="cgan", dataset=f"folder:{folder}", logdir=str(base / "run"),
                        batch_size=8, g_width=4, d_width=4, latent_dim=8, train_cycles=2,
                        cycles_per_loop=2, checkpoint_every=2, image_every=0, histogram_every=0)
    api.train(config)
    (base / "before").mkdir()
    return folder, base / "run", outputs(base / "run", base / "before")


def test_the_run_records_what_it_trained_on(trained):
    folder, logdir, _ = trained
    record = json.loads((logdir / "dataset.json").read_text())
    assert record == {"name": f"folder:{folder}", "kind": "image", "shape": [28, 28, 3],
                      "num_classes": 2, "num_examples": 8, "modes": None, "mode_std": None,
                      "class_names": ["circle", "square"]}


def test_without_its_folder_the_run_samples_and_exports_the_same(trained, tmp_path):
    folder, logdir, before = trained
    shutil.rmtree(folder, ignore_errors=True)
    samples, metadata, images = outputs(logdir, tmp_path)
    np.testing.assert_array_equal(samples, before[0])
    assert samples.shape == (3, 28, 28, 3)
    assert metadata == before[1] and metadata["class_names"] == ["circle", "square"]
    np.testing.assert_array_equal(images, before[2])
    with pytest.raises(DatasetError, match=(
            f"--mode=eval of {logdir} needs the run's real images as its reference, and they "
            f"cannot be read: --dataset='folder:{folder}': {folder} does not exist")):
        evaluate.evaluate(Config(mode="eval", logdir=str(logdir), eval_samples=8))


def test_a_resume_on_a_folder_whose_classes_changed_is_refused(trained):
    folder, logdir, _ = trained
    shutil.rmtree(folder, ignore_errors=True)
    write_folder(folder, {"circle": 4, "star": 4}, side=28)
    checkpoints = sorted(path.name for path in (logdir / "checkpoints").iterdir())
    config = api.config(**{**json.loads((logdir / "config.json").read_text()), "train_cycles": 4})
    with pytest.raises(DatasetError, match=(
            rf"folder:{folder} now gives class_names \['circle', 'star'\] "
            rf"\(was \['circle', 'square'\]\), not what the run in {logdir} was trained on")):
        api.train(config)
    assert sorted(path.name for path in (logdir / "checkpoints").iterdir()) == checkpoints


def test_a_flag_an_older_record_lacks_takes_the_value_that_kept_its_behaviour(tmp_path):
    """A run recorded before a flag existed trained as its neutral value (for preset fields) or
    its default said then: constant rates, no hold, float32 (before --precision, and --precision
    now defaults to auto)."""
    recorded = registry.resolve(Config(setup="dcgan")).as_dict()
    for flag in ("g_lr_schedule", "d_lr_schedule", "lr_hold_cycles", "precision"):
        del recorded[flag]
    (tmp_path / RUN_RECORD_FILE).write_text(json.dumps(recorded))
    run = restore.load_run_config(str(tmp_path))
    assert (run.g_lr_schedule, run.d_lr_schedule, run.lr_hold_cycles, run.precision) == (
        "constant", "constant", 0, "float32")
    assert (run.g_lr, run.topk_decay_cycles) == (8e-4, 5000)  # what it recorded stays
