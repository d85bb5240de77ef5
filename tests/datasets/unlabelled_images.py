"""A TFDS builder of three unlabelled, non-square images, prepared offline in a second."""

import numpy as np
import tensorflow_datasets as tfds


class UnlabelledTallImages(tfds.core.GeneratorBasedBuilder, skip_registration=True):
    """Three 6x4 RGB images without a label: pixel value 10*row, so crops are recognisable."""

    VERSION = tfds.core.Version("1.0.0")
    # No downloads, so no checksums; TFDS 4.9.10 would need the missing importlib_resources here.
    url_infos = None

    def _info(self) -> tfds.core.DatasetInfo:
        features = tfds.features.FeaturesDict({"image": tfds.features.Image(shape=(6, 4, 3))})
        return tfds.core.DatasetInfo(builder=self, features=features)

    def _split_generators(self, dl_manager):
        return {"train": self._generate_examples()}

    def _generate_examples(self):
        rows = np.repeat(np.arange(6, dtype=np.uint8)[:, None, None] * 10, 4, axis=1)
        for index in range(3):
            yield index, {"image": np.repeat(rows, 3, axis=2) + np.uint8(index)}
