import numpy as np
import pytest
import tensorflow as tf

from datasets import domains, pipeline
from datasets.errors import DatasetError


def _parse(spec, flag="domain_a", resolution=None):
    return domains.parse_domain(spec, flag=flag, resolution=resolution)


@pytest.mark.parametrize("spec, classes", [
    ("fashion_mnist:Sneaker", (7,)),
    ("fashion_mnist:ankle BOOT", (9,)),
    ("fashion_mnist:7", (7,)),
    ("fashion_mnist:Sneaker,Sandal", (7, 5)),
    ("fashion_mnist: 5 , t-shirt/top,5", (5, 0)),
    ("fashion_mnist", ()),
])
def test_classes_by_name_index_or_list(spec, classes):
    domain = _parse(spec)

    assert domain == domains.Domain(spec=spec, dataset="fashion_mnist", classes=classes,
                                    train_split="train", test_split="test", shape=(28, 28, 1),
                                    num_examples=None if classes else 60_000)


def test_resolution_sets_the_shape():
    assert _parse("fashion_mnist:Bag", resolution=32).shape == (32, 32, 1)


def test_unknown_class_names_the_flag_the_value_and_the_valid_names():
    with pytest.raises(DatasetError) as error:
        _parse("fashion_mnist:Sneakers", flag="domain_b")

    message = str(error.value)
    assert "--domain_b='fashion_mnist:Sneakers'" in message and "'Sneakers'" in message
    assert "0..9" in message and "'Sneaker'" in message and "'Ankle boot'" in message


@pytest.mark.parametrize("spec, message", [
    ("fashion_mnist:10", "no class '10'"),
    ("fashion_mnist:", "DATASET[:CLASS[,CLASS...]]"),
    ("fashion_mnist:Bag,", "DATASET[:CLASS[,CLASS...]]"),
    (":Bag", "DATASET[:CLASS[,CLASS...]]"),
    ("mnist_fake:1", "is unknown"),
    ("ring8", "is a toy (2-D points)"),
])
def test_bad_specs_are_dataset_errors_naming_the_flag(spec, message):
    with pytest.raises(DatasetError, match="--domain_a=") as error:
        _parse(spec)
    assert message in str(error.value)


def test_tfds_cycle_gan_domains_are_split_pairs():
    domain = _parse("tfds:cycle_gan/horse2zebra:b", resolution=64)

    assert domain.dataset == "tfds:cycle_gan/horse2zebra"
    assert (domain.train_split, domain.test_split, domain.classes) == ("trainB", "testB", (1,))
    assert domain.shape == (64, 64, 3)


@pytest.mark.parametrize("spec, resolution, message", [
    ("tfds:cycle_gan/horse2zebra", 64, "name one, e.g. tfds:cycle_gan/horse2zebra:A"),
    ("tfds:cycle_gan/horse2zebra:A,B", 64, "exactly one of A, B"),
    ("tfds:cycle_gan/horse2zebra:C", 64, "'A', 'B'"),
    ("tfds:cycle_gan/horse2zebra:A", None, "--resolution"),
])
def test_tfds_cycle_gan_domain_errors(spec, resolution, message):
    with pytest.raises(DatasetError, match="--domain_a=") as error:
        _parse(spec, resolution=resolution)
    assert message in str(error.value)


def test_tfds_names_keep_their_version_and_classes():
    domain = _parse("tfds:mnist:3.0.1:3")

    assert (domain.dataset, domain.classes, domain.train_split) == ("tfds:mnist:3.0.1", (3,), "train")


def test_pair_info_has_the_common_shape():
    info = domains.pair_info(_parse("fashion_mnist:Sneaker"), _parse("fashion_mnist:Ankle boot"))

    assert (info.kind, info.shape) == ("image", (28, 28, 1))
    assert info.name == "fashion_mnist:Sneaker <-> fashion_mnist:Ankle boot"


def test_pair_info_rejects_one_domain_twice_and_different_shapes():
    with pytest.raises(DatasetError, match="the same domain"):
        domains.pair_info(_parse("fashion_mnist:7"), _parse("fashion_mnist:sneaker"))
    with pytest.raises(DatasetError, match=r"\(28, 28, 1\).*\(32, 32, 3\)"):
        domains.pair_info(_parse("fashion_mnist:7"), _parse("tfds:cifar10:3", flag="domain_b"))


def test_domain_examples_hold_only_the_chosen_classes(fashion_mnist_data_dir):
    domain = _parse("fashion_mnist:Sneaker,Sandal")
    load = {"data_dir": fashion_mnist_data_dir, "fashion_mnist_dir": None, "resolution": None,
            "seed": 0}

    train = domains.load_domain(domain, split="train", **load).take(200)
    labels = np.array([example["label"] for example in train.as_numpy_iterator()])
    images = domains.training_images({"a": domain}, **load)()["a"]

    assert len(labels) == 200 and set(labels) == {5, 7}
    assert images.element_spec == tf.TensorSpec((28, 28, 1), tf.float32)
    test = domains.load_domain(domain, split="test", **load).take(50)
    assert {int(example["label"]) for example in test.as_numpy_iterator()} == {5, 7}


# The unpaired stream: pipeline.training_input_fn zips one endless stream per domain.
SIZES = {"a": 6, "b": 10}


def _unpaired_batches(batches, *, skip=0, seed=1, batch=2):
    def examples():  # A: 0..5, B: 100..109
        return {name: tf.data.Dataset.range(size).map(lambda x, o=offset: x + o)
                for (name, size), offset in zip(SIZES.items(), (0, 100))}

    input_fn = pipeline.training_input_fn(examples, global_batch_size=batch, seed=seed,
                                          skip_global_batches=skip)
    dataset = input_fn(tf.distribute.InputContext()).take(batches)
    elements = [(batch_["a"], batch_["b"]) for batch_ in dataset.as_numpy_iterator()]
    return np.concatenate([a for a, _ in elements]), np.concatenate([b for _, b in elements])


def test_each_domain_cycles_through_all_its_examples_every_epoch():
    a, b = _unpaired_batches(15)  # 30 pairs: 5 epochs of A, 3 of B

    for epoch in a.reshape(5, 6):
        assert sorted(epoch) == list(range(6))
    for epoch in b.reshape(3, 10):
        assert sorted(epoch) == list(range(100, 110))


def test_pairing_is_reshuffled_every_epoch():
    a, b = _unpaired_batches(15)
    pairs = list(zip(a, b))

    # The same A example meets different B examples from one of its epochs to the next.
    partners = {example: {partner for x, partner in pairs if x == example} for example in range(6)}
    assert all(len(found) >= 3 for found in partners.values())
    assert not np.array_equal(a[:6], a[6:12])


def test_the_unpaired_stream_is_a_function_of_the_seed():
    a, b = _unpaired_batches(5)
    again_a, again_b = _unpaired_batches(5)
    other_a, other_b = _unpaired_batches(5, seed=2)

    np.testing.assert_array_equal(a, again_a)
    np.testing.assert_array_equal(b, again_b)
    assert not np.array_equal(a, other_a) and not np.array_equal(b, other_b)


@pytest.mark.parametrize("skip", [1, 4, 7])
def test_resume_continues_the_unpaired_stream_exactly(skip):
    a, b = _unpaired_batches(skip + 6)

    resumed_a, resumed_b = _unpaired_batches(6, skip=skip)

    np.testing.assert_array_equal(resumed_a, a[2 * skip:])
    np.testing.assert_array_equal(resumed_b, b[2 * skip:])
