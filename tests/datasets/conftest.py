"""Fixtures shared by the datasets tests."""

import os
import socket

import pytest

from datasets import fashion_mnist


@pytest.fixture(scope="session")
def fashion_mnist_data_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A TFDS data_dir with fashion_mnist prepared from the local IDX files, built once per session
    (about 10 s). Tests that need it are skipped where the files are not installed."""
    idx_dir = fashion_mnist.DEFAULT_IDX_DIR
    names = fashion_mnist.IDX_FILES.values()
    if not all(os.path.isfile(os.path.join(idx_dir, name)) for name in names):
        pytest.skip(f"Fashion-MNIST IDX files are not in {idx_dir} (`make data` installs them)")
    data_dir = str(tmp_path_factory.mktemp("tfds_data"))
    fashion_mnist.prepare_from_idx(idx_dir=idx_dir, data_dir=data_dir)
    return data_dir


@pytest.fixture
def closed_port_url() -> str:
    """An http URL on localhost where nothing listens: connecting is refused at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/"


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test may start a real download: GANTRY_OFFLINE=1 makes every source skip it."""
    monkeypatch.setenv("GANTRY_OFFLINE", "1")
