"""The standard FID Inception network (`gan.inception`), on a stand-in graph with its interface:
the checksum check, the file, archive and download paths, and the features and logits."""

import os
import pathlib

import numpy as np
import pytest
import tensorflow as tf

from gan import inception
from tests.gan.inception_stand_in import (stand_in_bytes, stand_in_graph_def, stand_in_sha256,
                                          write_stand_in)


@pytest.fixture(scope="module")
def stand_in(tmp_path_factory):
    return write_stand_in(tmp_path_factory.mktemp("stand_in"))


@pytest.fixture
def accepted(monkeypatch):
    """The stand-in's checksum taken as the standard one."""
    monkeypatch.setattr(inception, "GRAPH_SHA256", stand_in_sha256())


def test_a_graph_that_is_not_the_standard_one_is_refused_with_both_checksums(stand_in):
    graph, _ = stand_in
    with pytest.raises(inception.GraphError) as raised:
        inception.ensure_graph(graph)
    message = str(raised.value)
    assert f"its SHA-256 is {stand_in_sha256()}" in message
    assert f"has {inception.GRAPH_SHA256}" in message and "95,673,916 bytes" in message
    with pytest.raises(inception.GraphError, match="not the standard FID Inception graph"):
        inception.inception_features(graph)


def test_a_graph_file_is_used_where_it_is(stand_in, accepted, tmp_path):
    graph, _ = stand_in
    assert inception.ensure_graph(graph, cache_dir=str(tmp_path)) == graph
    assert os.listdir(tmp_path) == []
    with pytest.raises(inception.GraphError, match="does not exist; give the path of "
                                                   "classify_image_graph_def.pb"):
        inception.ensure_graph(str(tmp_path / "missing.pb"))


def test_an_archive_is_extracted_into_the_cache_once(stand_in, accepted, tmp_path):
    _, archive = stand_in
    cached = inception.ensure_graph(archive, cache_dir=str(tmp_path / "cache"))
    assert cached == str(tmp_path / "cache" / inception.GRAPH_MEMBER)
    assert pathlib.Path(cached).read_bytes() == stand_in_bytes()
    assert os.listdir(tmp_path / "cache") == [inception.GRAPH_MEMBER]  # no partial file left
    (tmp_path / "not.tgz").write_text("not an archive")
    with pytest.raises(inception.GraphError, match="cannot be read as a .tgz archive"):
        inception.ensure_graph(str(tmp_path / "not.tgz"), cache_dir=str(tmp_path / "other"))


def test_without_a_file_the_graph_is_downloaded_once_and_the_archive_dropped(
        stand_in, accepted, tmp_path, monkeypatch):
    _, archive = stand_in
    monkeypatch.setattr(inception, "GRAPH_URL", pathlib.Path(archive).as_uri())
    cache = tmp_path / "cache"
    assert inception.ensure_graph("", cache_dir=str(cache)) == str(cache / inception.GRAPH_MEMBER)
    assert os.listdir(cache) == [inception.GRAPH_MEMBER]
    monkeypatch.setattr(inception, "GRAPH_URL", (tmp_path / "gone.tgz").as_uri())
    assert inception.ensure_graph("", cache_dir=str(cache)) == str(cache / inception.GRAPH_MEMBER)


def test_no_network_says_how_to_bring_the_file(accepted, tmp_path, monkeypatch):
    monkeypatch.setattr(inception, "GRAPH_URL", (tmp_path / "inception-2015-12-05.tgz").as_uri())
    with pytest.raises(inception.GraphError,
                       match="could not be downloaded from .*--inception_graph=FILE"):
        inception.ensure_graph("", cache_dir=str(tmp_path / "cache"))
    assert not os.path.exists(tmp_path / "cache" / inception.GRAPH_MEMBER)


def _reference(images: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The stand-in run as TTUR runs the real graph: one image at a time, as 0..255 levels into
    ExpandDims, pool_3 out; logits pool_3 times the softmax weights, without the bias."""
    graph_def = stand_in_graph_def()
    weights = next(tf.make_ndarray(node.attr["value"].tensor) for node in graph_def.node
                   if node.name == "softmax/weights")

    def pool(image):
        return tf.compat.v1.import_graph_def(graph_def, input_map={"ExpandDims:0": image},
                                             return_elements=["pool_3:0"])[0]

    network = tf.compat.v1.wrap_function(pool, [tf.TensorSpec([1, None, None, 3], tf.float32)])
    levels = np.round(np.clip((images + 1.0) * 127.5, 0, 255)).astype(np.float32)
    levels = np.repeat(levels, 3, axis=-1) if levels.shape[-1] == 1 else levels
    features = np.concatenate([network(levels[i : i + 1]).numpy().reshape(1, 2048)
                               for i in range(len(levels))])
    return features, features @ weights


@pytest.mark.parametrize("channels", [1, 3])
def test_features_are_pool_3_of_quantised_images_and_logits_have_no_bias(stand_in, accepted,
                                                                          channels):
    graph, _ = stand_in
    extractor = inception.inception_features(graph, batch_size=3)
    images = tf.random.stateless_uniform([5, 28, 28, channels], seed=[channels, 0]) * 2.2 - 1.1
    features, logits = extractor.outputs(images)
    expected_features, expected_logits = _reference(images.numpy())
    assert features.shape == (5, 2048) and logits.shape == (5, 1008)
    np.testing.assert_allclose(features, expected_features, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(logits, expected_logits, rtol=1e-4, atol=1e-4)
    assert extractor.record() == {"name": "inception", "checksum": stand_in_sha256(),
                                  "network": f"Inception 2015-12-05 graph {graph}"}


def test_other_channel_counts_are_refused(stand_in, accepted):
    extractor = inception.inception_features(stand_in[0])
    with pytest.raises(ValueError, match="RGB or grayscale images, got 2 channels"):
        extractor.features(tf.zeros([2, 28, 28, 2]))


def test_the_graph_is_hashed_once_per_extractor(stand_in, accepted, monkeypatch):
    hashed = []
    monkeypatch.setattr(inception, "file_checksum",
                        lambda path: hashed.append(path) or stand_in_sha256())
    inception.inception_features(stand_in[0])
    assert hashed == [stand_in[0]]
