import numpy as np
import pytest
import tensorflow as tf

from datasets import pipeline

NUM_EXAMPLES = 20
GLOBAL_BATCH = 8


def _context(pipelines: int, pipeline_id: int, replicas: int) -> tf.distribute.InputContext:
    return tf.distribute.InputContext(
        num_input_pipelines=pipelines, input_pipeline_id=pipeline_id, num_replicas_in_sync=replicas
    )


ONE_PIPELINE_TWO_REPLICAS = _context(1, 0, 2)


def _example(i: tf.Tensor) -> dict[str, tf.Tensor]:
    return {"x": tf.fill([3], tf.cast(i, tf.float32)), "label": i}


def _finite_examples() -> tf.data.Dataset:
    return tf.data.Dataset.range(NUM_EXAMPLES).map(_example)


def _infinite_examples() -> tf.data.Dataset:
    return tf.data.Dataset.counter().map(_example)


def _labels(input_fn, context=ONE_PIPELINE_TWO_REPLICAS, *, batches: int) -> np.ndarray:
    """The labels of the first `batches` batches, shape (batches, per-replica batch)."""
    dataset = input_fn(context).take(batches)
    return np.stack([batch["label"] for batch in dataset.as_numpy_iterator()])


def _input_fn(examples_fn=_finite_examples, **kwargs):
    kwargs = {"global_batch_size": GLOBAL_BATCH, "seed": 1, **kwargs}
    return pipeline.training_input_fn(examples_fn, **kwargs)


def test_batches_are_per_replica_sized_with_static_shapes():
    dataset = _input_fn()(ONE_PIPELINE_TWO_REPLICAS)

    assert dataset.element_spec["x"].shape == (4, 3)
    assert dataset.element_spec["label"].shape == (4,)
    assert dataset.cardinality() == tf.data.INFINITE_CARDINALITY


def test_each_epoch_is_a_fresh_permutation_of_all_examples():
    labels = _labels(_input_fn(), batches=10).reshape(2, NUM_EXAMPLES)

    assert sorted(labels[0]) == list(range(NUM_EXAMPLES))
    assert sorted(labels[1]) == list(range(NUM_EXAMPLES))
    assert not np.array_equal(labels[0], labels[1])
    assert not np.array_equal(labels[0], np.arange(NUM_EXAMPLES))


def test_order_is_a_function_of_the_seed():
    first = _labels(_input_fn(seed=5), batches=15)

    np.testing.assert_array_equal(first, _labels(_input_fn(seed=5), batches=15))
    assert not np.array_equal(first, _labels(_input_fn(seed=6), batches=15))


def test_holding_in_memory_gives_the_order_of_the_cache():
    np.testing.assert_array_equal(
        _labels(_input_fn(), batches=12), _labels(_input_fn(memory_limit_bytes=0), batches=12)
    )


@pytest.mark.parametrize("global_batches", [1, 4, 6])
def test_resume_continues_exactly_where_the_stream_was_across_epochs(global_batches):
    per_replica_batches = 2 * global_batches  # one pipeline feeds both replicas
    unskipped = _labels(_input_fn(), batches=per_replica_batches + 8)  # 5 per epoch: 3 to 5 epochs

    resumed = _labels(_input_fn(skip_global_batches=global_batches), batches=8)

    np.testing.assert_array_equal(resumed, unskipped[per_replica_batches:])


def test_resume_with_one_pipeline_per_replica_skips_one_batch_per_global_batch():
    context = _context(2, 1, 2)
    unskipped = _labels(_input_fn(), context, batches=10)

    resumed = _labels(_input_fn(skip_global_batches=3), context, batches=7)

    np.testing.assert_array_equal(resumed, unskipped[3:])


def test_two_pipelines_read_disjoint_halves():
    per_pipeline = [
        set(_labels(_input_fn(), _context(2, pipeline_id, 2), batches=5).ravel())
        for pipeline_id in (0, 1)
    ]

    assert per_pipeline[0].isdisjoint(per_pipeline[1])
    assert per_pipeline[0] | per_pipeline[1] == set(range(NUM_EXAMPLES))


def test_infinite_streams_are_batched_in_order_and_skipped():
    input_fn = _input_fn(_infinite_examples, skip_global_batches=2)

    np.testing.assert_array_equal(
        _labels(input_fn, batches=2), [[16, 17, 18, 19], [20, 21, 22, 23]]
    )


def test_a_strategy_gets_the_global_batch_on_its_one_replica():
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    batch = next(iter(strategy.distribute_datasets_from_function(_input_fn())))

    assert batch["label"].shape == (GLOBAL_BATCH,)


def test_replicas_must_spread_evenly_over_pipelines():
    input_fn = pipeline.training_input_fn(_finite_examples, global_batch_size=6, seed=0)

    with pytest.raises(ValueError, match="3 replicas cannot be spread evenly over 2 input pipe"):
        input_fn(_context(2, 0, 3))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"global_batch_size": 0}, "global_batch_size=0"),
        ({"shuffle_buffer": 0}, "shuffle_buffer=0"),
        ({"skip_global_batches": -1}, "skip_global_batches=-1"),
        ({"global_batches_needed": -1}, "global_batches_needed=-1"),
    ],
)
def test_bad_arguments_are_rejected_with_the_value(kwargs, message):
    with pytest.raises(ValueError, match=message):
        _input_fn(**kwargs)


def test_examples_held_in_memory_arrive_whole_in_each_batch():
    batch = next(iter(_input_fn()(ONE_PIPELINE_TWO_REPLICAS)))

    np.testing.assert_array_equal(batch["x"], np.repeat(batch["label"][:, None], 3, axis=1))


def test_hold_in_memory_returns_every_example_in_order():
    held = pipeline.hold_in_memory(_finite_examples(), limit_bytes=10_000)

    np.testing.assert_array_equal(held["label"], np.arange(NUM_EXAMPLES))
    assert held["x"].shape == (NUM_EXAMPLES, 3)


@pytest.mark.parametrize("limit_bytes", [0, 20 * (3 * 4 + 8) - 1])
def test_hold_in_memory_refuses_data_over_the_limit(limit_bytes):
    assert pipeline.hold_in_memory(_finite_examples(), limit_bytes=limit_bytes) is None


def test_data_of_unknown_size_is_held_until_it_passes_the_limit():
    evens = _finite_examples().filter(lambda example: example["label"] % 2 == 0)
    assert evens.cardinality() == tf.data.UNKNOWN_CARDINALITY
    per_example = 3 * 4 + 8

    held = pipeline.hold_in_memory(evens, limit_bytes=10 * per_example)
    too_small = pipeline.hold_in_memory(evens, limit_bytes=10 * per_example - 1)

    np.testing.assert_array_equal(held["label"], np.arange(0, NUM_EXAMPLES, 2))
    assert too_small is None


@pytest.mark.parametrize("dataset_fn", [
    _finite_examples,  # known size: refused before reading
    lambda: _finite_examples().filter(lambda example: example["label"] >= 0),  # unknown size
])
def test_hold_in_memory_refuses_more_examples_than_the_run_reads(dataset_fn):
    held = pipeline.hold_in_memory(dataset_fn(), limit_bytes=10_000, max_examples=NUM_EXAMPLES)

    assert held["label"].shape == (NUM_EXAMPLES,)
    assert pipeline.hold_in_memory(dataset_fn(), limit_bytes=10_000,
                                   max_examples=NUM_EXAMPLES - 1) is None


@pytest.mark.parametrize("global_batches_needed, holds", [
    (None, True),  # no end known
    (3, True),  # 3 global batches of 8 read all 20 examples
    (2, False),  # 16 examples: the run never reads the data whole
])
def test_data_is_held_only_when_the_run_reads_it_whole(monkeypatch, global_batches_needed, holds):
    held = []
    hold = pipeline.hold_in_memory
    monkeypatch.setattr(pipeline, "hold_in_memory", lambda *args: held.append(hold(*args)) or held[-1])

    labels = _labels(_input_fn(global_batches_needed=global_batches_needed), batches=6)

    assert [result is not None for result in held] == [holds]
    np.testing.assert_array_equal(labels, _labels(_input_fn(memory_limit_bytes=0), batches=6))


def test_chunks_are_rebatched_into_the_batches_of_the_unbatched_stream():
    def chunks() -> tf.data.Dataset:
        def chunk(c):
            labels = tf.range(5 * c, 5 * c + 5)
            return {"x": tf.tile(tf.cast(labels, tf.float32)[:, None], [1, 3]), "label": labels}

        return tf.data.Dataset.counter().map(chunk)

    chunked = _labels(_input_fn(lambda: pipeline.Chunks(chunks()), skip_global_batches=1),
                      batches=4)
    unbatched = _labels(_input_fn(lambda: chunks().unbatch(), skip_global_batches=1), batches=4)

    np.testing.assert_array_equal(chunked, unbatched)
    np.testing.assert_array_equal(chunked.ravel(), np.arange(8, 24))


def test_data_of_unknown_size_is_read_only_until_it_passes_the_limit():
    read = tf.Variable(0, dtype=tf.int64)

    def counted(example):
        read.assign_add(1)
        return example

    evens = _finite_examples().map(counted).filter(lambda example: example["label"] % 2 == 0)

    assert pipeline.hold_in_memory(evens, limit_bytes=10_000, max_examples=3) is None
    assert int(read.numpy()) == 7  # labels 0..6: the fourth even example, 6, passes the limit
