import hashlib
import os

import h5py
import keras
import numpy as np
import pytest
import tensorflow as tf

from gan import features


def _stand_in(input_shape=(32, 32, 3), head=True) -> keras.Model:
    """A tiny model with InceptionV3's outline: convolution, average pool, softmax top."""
    images = keras.Input(shape=input_shape)
    x = keras.layers.Conv2D(4, 3, strides=2,
                            kernel_initializer=keras.initializers.HeNormal(1))(images)
    x = keras.layers.GlobalAveragePooling2D(name="avg_pool")(x)
    if head:
        x = keras.layers.Dense(5, activation="softmax", name="predictions",
                               kernel_initializer=keras.initializers.GlorotUniform(2),
                               bias_initializer=keras.initializers.RandomNormal(seed=3))(x)
    return keras.Model(images, x)


def _images(count=7, side=28, channels=1, seed=0):
    return tf.random.stateless_uniform([count, side, side, channels], seed=[seed, 0]) * 2 - 1


def test_dense_head_gives_its_input_as_features_and_its_pre_activation_as_logits():
    model = _stand_in()
    extractor = features.keras_features(model, batch_size=3)
    images = _images()
    adapted = tf.tile(tf.image.resize(images, (32, 32)), [1, 1, 1, 3])
    pooled = keras.Model(model.inputs, model.get_layer("avg_pool").output)(adapted)
    feats, logits = extractor.outputs(images)
    assert (extractor.feature_dim, extractor.num_classes) == (4, 5)
    assert feats.shape == (7, 4) and logits.shape == (7, 5)
    np.testing.assert_allclose(feats, pooled.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(tf.nn.softmax(logits).numpy(), model(adapted).numpy(),
                               rtol=1e-5, atol=1e-6)


def test_results_do_not_depend_on_the_batch_size():
    model = _stand_in()
    small = features.keras_features(model, batch_size=2).outputs(_images(seed=1))
    whole = features.keras_features(model, batch_size=100).outputs(_images(seed=1))
    np.testing.assert_allclose(small[0], whole[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(small[1], whole[1], rtol=1e-5, atol=1e-6)


def test_a_model_without_dense_head_gives_features_only():
    extractor = features.keras_features(_stand_in(head=False))
    feats, logits = extractor.outputs(_images(count=3))
    assert feats.shape == (3, 4) and logits is None and extractor.num_classes is None
    with pytest.raises(ValueError, match="no classification head"):
        extractor.logits(_images(count=3))


def test_colour_images_are_not_squeezed_into_grayscale_models():
    extractor = features.keras_features(_stand_in(input_shape=(28, 28, 1)))
    with pytest.raises(ValueError, match="takes 1-channel images, got 3"):
        extractor.features(_images(channels=3))


@pytest.mark.parametrize("suffix", [".keras", ".h5"])
def test_model_files_load_as_the_same_extractor(tmp_path, suffix):
    model = _stand_in()
    path = str(tmp_path / f"model{suffix}")
    model.save(path)
    loaded = features.load_feature_model(path, batch_size=4)
    expected = features.keras_features(model).outputs(_images(seed=2))
    got = loaded.outputs(_images(seed=2))
    np.testing.assert_allclose(got[0], expected[0], rtol=1e-6)
    np.testing.assert_allclose(got[1], expected[1], rtol=1e-6)
    with open(path, "rb") as file:
        assert loaded.record() == {"name": "custom", "network": f"feature model {path}",
                                   "checksum": hashlib.sha256(file.read()).hexdigest()}


def test_bad_model_paths_are_refused(tmp_path):
    with pytest.raises(ValueError, match="must be a .keras or .h5"):
        features.load_feature_model(str(tmp_path / "model.pb"))
    with pytest.raises(FileNotFoundError, match="does not exist"):
        features.load_feature_model(str(tmp_path / "missing.keras"))
    for junk in ("junk.keras", "junk.h5"):
        (tmp_path / junk).write_text("not a model")
        with pytest.raises(ValueError, match=f"^Feature model '{tmp_path}/{junk}' cannot be "
                                             "loaded as a Keras model"):
            features.load_feature_model(str(tmp_path / junk))


def test_imagenet_weights_are_never_downloaded(tmp_path, monkeypatch):
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    cached = [os.path.join("/tmp/.keras/models", name)
              for name in features.KERAS_INCEPTION_FILES.values()]
    if any(os.path.exists(path) for path in cached):
        pytest.skip("Keras' fallback cache /tmp/.keras holds InceptionV3 weights on this machine")
    with pytest.raises(FileNotFoundError, match="does not download"):
        features.keras_inception_v3("imagenet")


def _weights_file(path, layers):
    with h5py.File(path, "w") as file:
        for name in layers:
            file.create_group(name)
    return str(path)


@pytest.mark.parametrize("top", [True, False])
def test_keras_inception_weights_file_picks_top_or_pooled_features(tmp_path, monkeypatch, top):
    calls = {}

    def fake_inception(*, weights, include_top, pooling):
        calls.update(weights=weights, include_top=include_top, pooling=pooling)
        if include_top:
            return _stand_in(input_shape=(299, 299, 3))
        images = keras.Input(shape=(299, 299, 3))
        pooled = keras.layers.GlobalAveragePooling2D()(keras.layers.Conv2D(6, 3, strides=4)(images))
        return keras.Model(images, pooled)

    monkeypatch.setattr(keras.applications, "InceptionV3", fake_inception)
    layers = ["conv2d", "avg_pool", "predictions"] if top else ["conv2d"]
    path = _weights_file(tmp_path / "weights.h5", layers)
    extractor = features.keras_inception_v3(path, batch_size=2)
    assert calls == {"weights": path, "include_top": top, "pooling": None if top else "avg"}
    feats, logits = extractor.outputs(_images(count=3))
    assert extractor.name == "keras_inception_v3"
    assert extractor.checksum == features.file_checksum(path)
    assert feats.shape == (3, 4 if top else 6)
    assert (logits is not None) == top


def test_missing_keras_inception_weights_file_is_refused(tmp_path):
    with pytest.raises(FileNotFoundError, match="do not exist"):
        features.keras_inception_v3(str(tmp_path / "weights.h5"))
