"""A run directory on a TensorFlow filesystem other than the local one (gs://, s3://, ...),
here the in-memory ram://: training writes its record, events and checkpoints there, resumes
from them, and sampling reads them and writes its output there too."""

import dataclasses
import io
import uuid

import numpy as np
import tensorflow as tf

from trainers.config.flags import Config
from trainers.config.record import read_run_record
from trainers.modes.sample import sample
from trainers.modes.train import train
from trainers.setups import registry


def test_train_resume_and_sample_on_ram():
    root = f"ram://gantry-{uuid.uuid4().hex}"
    base = Config(dataset="ring8", batch_size=16, latent_dim=4, seed=3, checkpoint_every=2,
                  cycles_per_loop=2, histogram_every=0, image_every=2, logdir=f"{root}/run")
    train(registry.resolve(dataclasses.replace(base, train_cycles=4)), progress_stream=io.StringIO())
    assert read_run_record(f"{root}/run")["train_cycles"] == 4
    assert tf.train.latest_checkpoint(f"{root}/run/checkpoints").endswith("ckpt-4")
    resumed = train(registry.resolve(dataclasses.replace(base, train_cycles=6)),
                    progress_stream=io.StringIO())
    assert resumed.step == 6
    sampled = sample(registry.resolve(dataclasses.replace(
        base, mode="sample", num_samples=10, output=f"{root}/out/points.npy")))
    assert sampled.checkpoint == f"{root}/run/checkpoints/ckpt-6" and sampled.count == 10
    with tf.io.gfile.GFile(f"{root}/out/points.npy", "rb") as file:
        assert np.load(io.BytesIO(file.read())).shape == (10, 2)
