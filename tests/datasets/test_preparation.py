"""Preparing a dataset while another process prepares it: one waits for the other, then uses
its data instead of preparing it again."""

import contextlib
import fcntl
import shutil
import subprocess
import sys
import threading
import time

import pytest
import tensorflow_datasets as tfds

from datasets import fashion_mnist, network, preparation, tfds_source
from tests.datasets.unlabelled_images import UnlabelledTallImages


def test_a_second_holder_waits_until_the_first_leaves(tmp_path):
    events = []
    first_inside = threading.Event()

    def first():
        with preparation.exclusive(str(tmp_path), "fashion_mnist"):
            first_inside.set()
            time.sleep(0.3)
            events.append("first leaves")

    thread = threading.Thread(target=first)
    thread.start()
    assert first_inside.wait(10)
    with preparation.exclusive(str(tmp_path), "fashion_mnist"):
        events.append("second enters")
    thread.join()

    assert events == ["first leaves", "second enters"]


def test_other_datasets_and_directories_do_not_wait(tmp_path):
    with preparation.exclusive(str(tmp_path / "a"), "fashion_mnist"):
        with preparation.exclusive(str(tmp_path / "a"), "cycle_gan/horse2zebra"):
            with preparation.exclusive(str(tmp_path / "b"), "fashion_mnist"):
                pass
    assert (tmp_path / "a" / ".cycle_gan_horse2zebra.gantry-lock").is_file()


def test_a_killed_holder_releases_the_lock(tmp_path):
    path = preparation.lock_path(str(tmp_path), "mnist")
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, sys, time\n"
         f"handle = open({path!r}, 'a'); fcntl.flock(handle, fcntl.LOCK_EX)\n"
         "print('held', flush=True); time.sleep(120)"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with open(path, "a") as probe, pytest.raises(BlockingIOError):
            fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        holder.kill()  # SIGKILL: the holder never unlocks
        holder.wait()
    start = time.monotonic()
    with preparation.exclusive(str(tmp_path), "mnist"):
        pass
    assert time.monotonic() - start < 5


def test_an_unwritable_data_directory_is_not_locked(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with preparation.exclusive(str(blocker / "tfds"), "fashion_mnist"):
        entered = True
    assert entered


@contextlib.contextmanager
def prepared_by_another_process_meanwhile(source_dir, data_dir):
    """What a process finds after waiting for the lock: the other one prepared the data."""
    shutil.copytree(source_dir, data_dir, dirs_exist_ok=True)
    yield


def test_fashion_mnist_prepared_while_waiting_is_used_not_prepared_again(
        tmp_path, monkeypatch, fashion_mnist_data_dir):
    data_dir = str(tmp_path / "tfds")
    monkeypatch.setattr(preparation, "exclusive",
                        lambda root, name: prepared_by_another_process_meanwhile(fashion_mnist_data_dir, data_dir))
    monkeypatch.setattr(fashion_mnist, "prepare_from_idx",
                        lambda **kwargs: pytest.fail("prepared a second time"))

    builder = fashion_mnist.prepared_builder(data_dir=data_dir, fashion_mnist_dir=str(tmp_path))

    assert builder.is_prepared()
    assert builder.info.splits["train"].num_examples == fashion_mnist.NUM_TRAIN_EXAMPLES


def test_tfds_dataset_prepared_while_waiting_is_used_not_downloaded_again(tmp_path, monkeypatch):
    elsewhere = UnlabelledTallImages(data_dir=str(tmp_path / "elsewhere"))
    elsewhere.download_and_prepare()
    builder = UnlabelledTallImages(data_dir=str(tmp_path / "tfds"))
    monkeypatch.setattr(network, "download_allowed", lambda urls: (True, "test"))
    monkeypatch.setattr(preparation, "exclusive", lambda root, name: prepared_by_another_process_meanwhile(
        str(tmp_path / "elsewhere"), str(tmp_path / "tfds")))
    monkeypatch.setattr(builder, "download_and_prepare", lambda: pytest.fail("downloaded a second time"))

    tfds_source.ensure_prepared(builder)

    assert builder.is_prepared()
    assert builder.info.splits["train"].num_examples == 3
    assert len(list(tfds.as_numpy(builder.as_dataset(split="train")))) == 3
