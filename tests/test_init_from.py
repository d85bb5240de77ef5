"""Fine-tuning, `--init_from=LOGDIR[:STEP]`: a tiny DCGAN pretrained on Fashion-MNIST, then a new
run on a folder of images of the same shape. At its step 0 the new run holds the source
checkpoint's weights (on every replica), with fresh optimizers and step; a source that does not
fit or is not there is refused before training, leaving no run directory; the fine-tuned run
resumes bit-exactly from its own checkpoints, without reading the source again."""

import json
import os
import shutil

import numpy as np
import pytest

from tests.cli import TINY, run, run_together
from tests.checkpoint_files import assert_same_checkpoints
from tests.image_folders import write_folder
from trainers.config.flags import Config
from trainers.engine.distribution import make_strategy
from trainers.modes import init_from, restore, train
from trainers.setups import registry

OUTPUTS = ["--image_every=0", "--histogram_every=0"]


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> str:
    """A DCGAN trained 4 cycles on Fashion-MNIST, with checkpoints at steps 2 and 4."""
    logdir = str(tmp_path_factory.mktemp("pretrained") / "run")
    result = run(*TINY, *OUTPUTS, f"--logdir={logdir}", "--train_cycles=4", "--checkpoint_every=2")
    assert result.returncode == 0, result.stderr[-2000:]
    return logdir


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> str:
    """24 grayscale 28x28 images: Fashion-MNIST's shape, other pictures. (Few enough that every
    run here reads them whole, which holds them in memory: a run that reads fewer caches them, and
    those two readings do not give the same order today.)"""
    return write_folder(str(tmp_path_factory.mktemp("folder")), 24, side=28, channels=1)


@pytest.mark.parametrize("strategy", ["default", "mirrored"])
def test_a_new_run_starts_with_the_source_weights_and_fresh_optimizers(source, folder, tmp_path,
                                                                       strategy):
    config = registry.resolve(Config(
        batch_size=16, g_width=8, d_width=8, latent_dim=16, cycles_per_loop=2, precision="float32",
        shuffle_buffer=256, image_every=0, histogram_every=0, train_cycles=2,
        dataset=f"folder:{folder}", logdir=str(tmp_path / "run"), init_from=f"{source}:2",
        ema_halflife_kimg=0.1, strategy=strategy, cpu_replicas=2 if strategy == "mirrored" else 1))
    run = train.build(config, make_strategy(config.strategy, cpu_replicas=config.cpu_replicas))
    assert run.strategy.num_replicas_in_sync == config.cpu_replicas
    models = run.built.models
    expected = restore.restore(source, use_ema=False,
                               checkpoint=os.path.join(source, "checkpoints", "ckpt-2")).built.models
    assert not all(np.array_equal(a, b) for a, b in zip(models["generator"].get_weights(),
                                                        expected["generator"].get_weights()))
    record = init_from.start_from_source(config, run.built, resumed=False, is_chief=True)

    # The source keeps no EMA generator: this run's starts as a copy of the loaded generator.
    for name, origin in [("generator", "generator"), ("discriminator", "discriminator"),
                         ("generator_ema", "generator")]:
        assert len(models[name].weights) == len(expected[origin].weights) >= 6
        for variable, value in zip(models[name].weights, expected[origin].get_weights()):
            for replica in run.strategy.experimental_local_results(variable.value):
                np.testing.assert_array_equal(replica.numpy(), value, err_msg=variable.path)
    assert int(run.state.step.numpy()) == 0
    assert {name: int(o.iterations.numpy()) for name, o in run.state.optimizers.items()} == {
        "discriminator": 0, "generator": 0}
    with open(tmp_path / "run" / "init_from.json") as file:
        assert json.load(file) == record == {
            "init_from": f"{source}:2", "logdir": source, "step": 2,
            "checkpoint": os.path.join(source, "checkpoints", "ckpt-2"),
            "models": {"discriminator": "discriminator", "generator": "generator",
                       "generator_ema": "generator"}}
    assert init_from.start_from_source(config, run.built, resumed=True, is_chief=True) is None


def test_a_source_that_does_not_fit_or_is_not_there_is_refused_before_training(
        source, folder, tmp_path):
    common = [*TINY, *OUTPUTS, "--train_cycles=2", f"--dataset=folder:{folder}"]
    logdirs = [tmp_path / name for name in ("wider", "missing", "step", "cgan")]
    wider, missing, step, cgan = run_together(
        [*common, f"--logdir={logdirs[0]}", f"--init_from={source}", "--g_width=16"],
        [*common, f"--logdir={logdirs[1]}", f"--init_from={tmp_path / 'nothing'}"],
        [*common, f"--logdir={logdirs[2]}", f"--init_from={source}:3"],
        [*TINY, *OUTPUTS, "--train_cycles=2", "--setup=cgan", f"--logdir={logdirs[3]}",
         f"--init_from={source}"])
    assert [result.returncode for result in (wider, missing, step, cgan)] == [2, 2, 2, 2]
    assert (f"the generator of the source run {source} (step 4, --setup=dcgan, trained on "
            f"fashion_mnist, images 28x28x1) does not fit the generator of this run "
            f"({logdirs[0]}, --setup=dcgan, --dataset=folder:{folder}): weight seed/kernel is "
            "(16, 784) there and (16, 1568) here") in wider.stderr
    assert f"--init_from='{tmp_path / 'nothing'}': {tmp_path / 'nothing'} does not exist" in missing.stderr
    assert "keeps no checkpoint of step 3; its kept steps are 2, 4." in step.stderr
    assert "the discriminator of the source run" in cgan.stderr and "it has 6 weights there and 10 here" in cgan.stderr
    assert not any(logdir.exists() for logdir in logdirs)


def test_the_fine_tuned_run_resumes_bit_exactly_without_its_source(source, folder, tmp_path):
    copy = str(tmp_path / "source")
    shutil.copytree(source, copy)
    common = [*TINY, *OUTPUTS, "--deterministic", "--checkpoint_every=2", "--ema_halflife_kimg=0.1",
              f"--dataset=folder:{folder}", f"--init_from={copy}"]
    straight, first = run_together([*common, f"--logdir={tmp_path / 'a'}", "--train_cycles=4"],
                                   [*common, f"--logdir={tmp_path / 'b'}", "--train_cycles=2"])
    assert straight.returncode == 0 and first.returncode == 0, first.stderr[-2000:]
    assert f"Started from step 4 of {copy}: discriminator, generator, generator_ema (from generator)." in first.stdout
    shutil.rmtree(copy)  # a resume reads its own checkpoints only
    second = run(*common, f"--logdir={tmp_path / 'b'}", "--train_cycles=4")
    assert second.returncode == 0, second.stderr[-2000:]
    assert "Started from" not in second.stdout
    assert_same_checkpoints(*(str(tmp_path / d / "checkpoints" / "ckpt-4") for d in ("a", "b")))
    with open(tmp_path / "b" / "init_from.json") as file:
        assert json.load(file)["checkpoint"] == os.path.join(copy, "checkpoints", "ckpt-4")
