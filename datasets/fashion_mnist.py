"""Fashion-MNIST as a prepared TFDS builder, found or built without needing the internet.

Sources, tried in this order; the one used is logged:
  1. TFDS data already prepared in data_dir: used as is, nothing is read from elsewhere.
  2. The four IDX .gz files in fashion_mnist_dir (default /usr/share/datasets/fashion-mnist,
     where Debian's package dataset-fashion-mnist puts them): `LocalFashionMNIST` prepares the
     TFDS dataset from them into data_dir, offline, once (about 10 s).
  3. A TFDS download into data_dir, attempted only when `datasets.network.download_allowed`
     says it can work (GANTRY_OFFLINE, else a quick probe): offline, TFDS retries for minutes.
If none works, one DatasetError lists what was tried and the three ways to get the data.

Where the prepared data lives: under TFDS's own name and version (data_dir/fashion_mnist/3.0.1).
`LocalFashionMNIST` is TFDS's FashionMNIST builder with only the origin of the files changed:
same features, same example keys and so the same record order, the same name and version. What
it writes is what TFDS's download would write, so a sibling name would only hide the data from
`tfds.load("fashion_mnist", data_dir=...)`, from step 1 of later runs, and from other tools. The
class skips TFDS's registry (which would refuse a second "fashion_mnist"); TFDS's registered
builder reads the data back. One visible trace: dataset_info.json names this module.
"""

import os
import tempfile

import tensorflow_datasets as tfds
from absl import logging
from tensorflow_datasets.core.download.extractor import ExtractError
from tensorflow_datasets.image_classification import mnist

from datasets import network, preparation, tfds_source
from datasets.errors import DatasetError

NAME = "fashion_mnist"
IMAGE_SHAPE = (28, 28, 1)
CLASS_NAMES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt",
               "Sneaker", "Bag", "Ankle boot")
NUM_CLASSES = len(CLASS_NAMES)
NUM_TRAIN_EXAMPLES = 60_000
NUM_TEST_EXAMPLES = 10_000
DEFAULT_IDX_DIR = "/usr/share/datasets/fashion-mnist"
IDX_FILES = {
    "train_data": "train-images-idx3-ubyte.gz",
    "train_labels": "train-labels-idx1-ubyte.gz",
    "test_data": "t10k-images-idx3-ubyte.gz",
    "test_labels": "t10k-labels-idx1-ubyte.gz",
}
# What a TFDS download contacts: TFDS's mirror first, then the dataset's own host.
DOWNLOAD_URLS = (*tfds_source.TFDS_MIRROR_URLS, mnist.FashionMNIST.URL)

_HOW_TO_GET_IT = f"""Get Fashion-MNIST one of these ways:
  (a) sudo apt-get install dataset-fashion-mnist   (puts the files in {DEFAULT_IDX_DIR})
  (b) --fashion_mnist_dir=FOLDER, a folder holding {", ".join(IDX_FILES.values())}
  (c) internet access, so TFDS can download it, or TFDS data already prepared in --data_dir"""


class LocalFashionMNIST(mnist.FashionMNIST, skip_registration=True):
    """TFDS's Fashion-MNIST builder reading the IDX .gz files from a local folder."""

    name = NAME
    # Nothing is downloaded, so there are no URL checksums to look up. Looking them up would
    # also fail: TFDS 4.9.10 imports the undeclared `importlib_resources` there
    # (tensorflow/datasets#11212).
    url_infos = None

    def __init__(self, *, idx_dir: str, **kwargs):
        self._idx_dir = idx_dir
        super().__init__(**kwargs)

    def _split_generators(self, dl_manager: tfds.download.DownloadManager):
        # TFDS's IDX reader needs the decompressed files; extract() writes them to download_dir.
        files = dl_manager.extract(
            {key: os.path.join(self._idx_dir, name) for key, name in IDX_FILES.items()}
        )
        return [
            tfds.core.SplitGenerator(
                name=tfds.Split.TRAIN,
                gen_kwargs=dict(
                    num_examples=NUM_TRAIN_EXAMPLES,
                    data_path=files["train_data"],
                    label_path=files["train_labels"],
                ),
            ),
            tfds.core.SplitGenerator(
                name=tfds.Split.TEST,
                gen_kwargs=dict(
                    num_examples=NUM_TEST_EXAMPLES,
                    data_path=files["test_data"],
                    label_path=files["test_labels"],
                ),
            ),
        ]


def prepare_from_idx(*, idx_dir: str, data_dir: str | None) -> None:
    """Prepares TFDS's fashion_mnist in data_dir from the four IDX .gz files in idx_dir, offline.

    The decompressed copies (55 MB) go to a temporary folder that is removed afterwards.
    """
    builder = LocalFashionMNIST(idx_dir=idx_dir, data_dir=data_dir)
    with tempfile.TemporaryDirectory(prefix="gantry-fashion-mnist-") as scratch:
        builder.download_and_prepare(
            download_dir=scratch,
            download_config=tfds.download.DownloadConfig(try_download_gcs=False),
        )


def prepared_builder(
    *, data_dir: str | None, fashion_mnist_dir: str | None
) -> tfds.core.DatasetBuilder:
    """TFDS's fashion_mnist builder with its data prepared in data_dir (None: TFDS's default,
    ~/tensorflow_datasets), from the first source that works (see the module docstring)."""
    builder = tfds.builder(NAME, data_dir=data_dir)
    if builder.is_prepared():
        logging.info("Fashion-MNIST: using the prepared TFDS data in %s.", builder.data_dir)
        return builder
    with preparation.exclusive(builder.data_dir_root, NAME):
        builder = tfds.builder(NAME, data_dir=data_dir)
        if builder.is_prepared():  # by another process, while this one waited
            logging.info("Fashion-MNIST: using the TFDS data just prepared in %s.", builder.data_dir)
            return builder
        return _prepare(builder, data_dir=data_dir, fashion_mnist_dir=fashion_mnist_dir)


def _prepare(builder: tfds.core.DatasetBuilder, *, data_dir: str | None,
             fashion_mnist_dir: str | None) -> tfds.core.DatasetBuilder:
    """Sources 2 and 3 of the module docstring, for a builder whose data is not prepared."""
    where = builder.data_dir_root
    tried = [f"1. prepared TFDS data in --data_dir={where}: not there"]

    idx_dir = fashion_mnist_dir or DEFAULT_IDX_DIR
    missing = [
        name for name in IDX_FILES.values() if not os.path.isfile(os.path.join(idx_dir, name))
    ]
    if missing:
        tried.append(f"2. IDX files in --fashion_mnist_dir={idx_dir}: missing {', '.join(missing)}")
    else:
        logging.info("Fashion-MNIST: preparing TFDS data in %s from %s.", where, idx_dir)
        try:
            prepare_from_idx(idx_dir=idx_dir, data_dir=data_dir)
            return tfds.builder(NAME, data_dir=data_dir)
        except (ExtractError, OSError, ValueError) as error:  # not gzip, or too short
            tried.append(f"2. IDX files in --fashion_mnist_dir={idx_dir}: unreadable ({error})")

    allowed, reason = network.download_allowed(DOWNLOAD_URLS)
    if allowed:
        logging.info("Fashion-MNIST: downloading with TFDS into %s (%s).", where, reason)
        try:
            builder.download_and_prepare()
            return builder
        except Exception as error:  # TFDS raises many unrelated types for one cause: no data.
            reason = f"failed ({type(error).__name__}: {error})"
    tried.append(f"3. TFDS download: {reason}")
    raise DatasetError(
        "--dataset=fashion_mnist: no source of the data worked. Tried:\n  "
        + "\n  ".join(tried)
        + "\n"
        + _HOW_TO_GET_IT
    )
