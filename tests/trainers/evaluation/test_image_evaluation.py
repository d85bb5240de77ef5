"""The extractor `--evaluator` names: a file that is not a Keras model is a flag error."""

import dataclasses

import pytest

from trainers.config.flags import Config, ConfigError
from trainers.evaluation.image_evaluation import feature_extractor


def test_a_file_that_is_not_a_keras_model_names_the_flag(tmp_path):
    junk = tmp_path / "bad.keras"
    junk.write_text("junk")
    config = dataclasses.replace(Config(), evaluator=str(junk))
    with pytest.raises(ConfigError, match=f"^--evaluator='{junk}': Feature model .* cannot be "
                                          "loaded as a Keras model"):
        feature_extractor(config, "fashion_mnist", None)
