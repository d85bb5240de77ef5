"""From unbatched examples to the per-replica batches a distributed GAN step consumes.

Each stage, in order, and why:
  shard     with several input pipelines (multi-worker), each reads a disjoint 1/n of the data;
  hold      finite data only: decoding and resizing happen once, not every epoch. Data whose
            preprocessed tensors fit in `memory_limit_bytes` (Fashion-MNIST at 28x28: ~190 MB)
            is decoded into memory before training starts, and every later stage works on
            example indices, gathering a whole batch at once: the first epoch does not decode
            while the step waits, and no epoch pays tf.data's per-example cost on images. Larger
            data goes through `cache()` instead, filled during the first epoch, and so does
            data the run will not read whole (`global_batches_needed`): a short run (a smoke
            test, the last steps of a resumed run) reads only the examples it draws;
  shuffle   finite data only, seeded, with reshuffle_each_iteration=True: a new order every
            epoch, yet the whole stream of epochs is a pure function of `seed`. Shuffling
            indices and shuffling the examples themselves give the same order, so whether data
            is held in memory or cached never changes what a run sees;
  repeat    finite data only: training runs by steps, not epochs;
  batch     per-replica size, drop_remainder=True so shapes are static (one XLA/tf.function
            trace) and every replica gets a full batch;
  skip      resume: a distributed iterator cannot be checkpointed, so a restarted run rebuilds
            the identical stream and drops the batches the run already consumed. It costs
            producing those batches (a few seconds per million examples on 2 CPU cores),
            not a replay of training;
  prefetch  overlaps input with the training step (not for `Chunks`, see there).
Infinite streams (the toys) are already random and cannot be held, so they are only sharded,
batched and skipped. They must say so through their cardinality (INFINITE): anything else is
treated as finite and cached. Options: deterministic=True, so parallel stages keep their order
and the resume contract holds.

Unpaired data (CycleGAN's two domains): `examples_fn` returns a mapping {name: dataset}. Each
member goes through shard, hold, shuffle (with its own seed) and repeat on its own, and the
endless streams are zipped into examples {name: element} before batching. So the pairing is
new every epoch, domains of different sizes each cycle through all their examples, and the
zipped stream is again a pure function of `seed` that `skip` resumes.

Resume contract: the caller counts global batches (one per-replica batch for every replica).
With P input pipelines and R replicas in sync each global batch takes R/P batches from every
pipeline, so `skip_global_batches=g` makes each pipeline start at its batch g*R/P: exactly where
the same pipeline, built with the same arguments and 0, stood after g global batches.
"""

import dataclasses
from typing import Any, Callable, Mapping

import tensorflow as tf


@dataclasses.dataclass(frozen=True)
class Chunks:
    """An infinite stream whose elements are chunks of examples (a leading example axis), e.g.
    `toys.toy_chunks`: the pipeline re-slices whole chunks into batches (`rebatch`), the same
    batches as unbatching and batching, without tf.data's per-example work, and hands them to
    the step directly, without a prefetch thread: for cheap, computed streams."""

    dataset: tf.data.Dataset


InputFn = Callable[[tf.distribute.InputContext], tf.data.Dataset]
Examples = tf.data.Dataset | Mapping[str, tf.data.Dataset] | Chunks

# Finite data up to this size is held in memory as tensors (see the module docstring).
DEFAULT_MEMORY_LIMIT_BYTES = 2 * 1024**3
_HOLD_BATCH = 4096  # examples decoded per step while filling memory


def hold_in_memory(dataset: tf.data.Dataset, limit_bytes: int,
                   max_examples: int | None = None) -> Any | None:
    """All examples of a finite dataset as tensors with a leading example axis, or None when
    they would take more than `limit_bytes` or number more than `max_examples` (the most the
    run will read: decoding the rest would be wasted), have no fixed size, or there are none.

    Reading stops as soon as a limit is passed, so data of unknown size (a filtered class
    subset) is tried, and data that is too large costs at most `limit_bytes` (or
    `max_examples`) of reading before the caller falls back to `cache()`.
    """
    specs = tf.nest.flatten(dataset.element_spec)
    sizes = [spec.shape.num_elements() for spec in specs]
    if limit_bytes <= 0 or not tf.executing_eagerly() or None in sizes or any(
            not (spec.dtype.is_floating or spec.dtype.is_integer or spec.dtype.is_bool)
            for spec in specs):
        return None
    bytes_per_example = sum(size * spec.dtype.size for size, spec in zip(sizes, specs))
    max_examples = limit_bytes // bytes_per_example if max_examples is None else min(
        max_examples, limit_bytes // bytes_per_example)
    if int(dataset.cardinality()) > max_examples:
        return None
    parts, held_examples = [], 0
    # take: data of unknown size is read only until it proves too large.
    for part in dataset.take(max_examples + 1).batch(_HOLD_BATCH).prefetch(1):
        held_examples += int(tf.shape(tf.nest.flatten(part)[0])[0])
        if held_examples > max_examples:
            return None
        parts.append(part)
    if not parts:
        return None
    return tf.nest.map_structure(lambda *pieces: tf.concat(pieces, axis=0), *parts)


def gather_examples(held: Any, indices: tf.Tensor) -> Any:
    """The held examples at `indices`, one batch in a single gather per tensor."""
    return tf.nest.map_structure(lambda tensor: tf.gather(tensor, indices), held)


def training_input_fn(
    examples_fn: Callable[[], Examples],
    *,
    global_batch_size: int,
    seed: int,
    shuffle_buffer: int = 10_000,
    skip_global_batches: int = 0,
    global_batches_needed: int | None = None,
    memory_limit_bytes: int = DEFAULT_MEMORY_LIMIT_BYTES,
) -> InputFn:
    """An input function for `strategy.distribute_datasets_from_function` (see module docstring).

    examples_fn builds the unbatched examples (e.g. a `registry.load_split` call), a mapping
    of finite datasets to zip unpaired, or `Chunks` of an infinite stream; it is called once per input pipeline, inside the
    function, so each pipeline owns its dataset. global_batches_needed: how many global batches
    the run will draw after the skipped ones (None: no end known); finite data is held in memory
    only when the run reads it whole. memory_limit_bytes: the most finite data one pipeline
    holds in memory (0: always `cache()`). Neither changes the stream, only how it is read.
    """
    if global_batch_size < 1:
        raise ValueError(f"global_batch_size={global_batch_size} must be at least 1.")
    if shuffle_buffer < 1:
        raise ValueError(f"shuffle_buffer={shuffle_buffer} must be at least 1.")
    if skip_global_batches < 0:
        raise ValueError(
            f"skip_global_batches={skip_global_batches} must be 0 (fresh run) or more (resume)."
        )
    if global_batches_needed is not None and global_batches_needed < 0:
        raise ValueError(f"global_batches_needed={global_batches_needed} must be 0 or more.")

    def input_fn(input_context: tf.distribute.InputContext) -> tf.data.Dataset:
        batch_size = input_context.get_per_replica_batch_size(global_batch_size)
        replicas, pipelines = input_context.num_replicas_in_sync, input_context.num_input_pipelines
        if replicas % pipelines:
            raise ValueError(
                f"{replicas} replicas cannot be spread evenly over {pipelines} input pipelines."
            )
        # Each global batch takes replicas/pipelines per-replica batches from every pipeline.
        examples_needed = (None if global_batches_needed is None
                           else global_batches_needed * batch_size * (replicas // pipelines))

        def shard(dataset: tf.data.Dataset) -> tf.data.Dataset:
            if pipelines == 1:
                return dataset
            return dataset.shard(pipelines, input_context.input_pipeline_id)

        def endless(dataset: tf.data.Dataset, stream_seed: int) -> tuple[tf.data.Dataset, Any]:
            """(endless stream, held tensors): with held tensors the stream yields indices."""
            dataset = shard(dataset)
            if dataset.cardinality() == tf.data.INFINITE_CARDINALITY:
                return dataset, None
            held = hold_in_memory(dataset, memory_limit_bytes, examples_needed)
            if held is not None:
                count = tf.shape(tf.nest.flatten(held)[0], out_type=tf.int64)[0]
                dataset = tf.data.Dataset.range(count)
            else:
                dataset = dataset.cache()
            dataset = dataset.shuffle(shuffle_buffer, seed=stream_seed, reshuffle_each_iteration=True)
            return dataset.repeat(), held

        examples = examples_fn()
        gather = None  # index batches -> example batches, where data is held in memory
        # Chunks are not prefetched: slicing a batch off a drawn chunk costs less than the
        # hand-over from a prefetch thread (2-D toy, 1.3 ms cycles: input wait 5.2% with
        # prefetch, 0.5% without).
        prefetch = not isinstance(examples, Chunks)
        if not prefetch:
            dataset = shard(examples.dataset).rebatch(batch_size, drop_remainder=True)
        elif isinstance(examples, Mapping):
            # Member i (by sorted name) is shuffled with seed + i: independent orders, whatever
            # order the mapping lists them in.
            streams = {name: endless(examples[name], seed + index)
                       for index, name in enumerate(sorted(examples))}
            dataset = tf.data.Dataset.zip({name: stream for name, (stream, _) in streams.items()})
            dataset = dataset.batch(batch_size, drop_remainder=True)
            held = {name: member_held for name, (_, member_held) in streams.items()}
            if any(member_held is not None for member_held in held.values()):
                gather = lambda batch: {  # noqa: E731
                    name: part if held[name] is None else gather_examples(held[name], part)
                    for name, part in batch.items()}
        else:
            dataset, held = endless(examples, seed)
            dataset = dataset.batch(batch_size, drop_remainder=True)
            if held is not None:
                gather = lambda indices: gather_examples(held, indices)  # noqa: E731
        # Skipped before gathering: resuming far into a run costs index batches only.
        dataset = dataset.skip(skip_global_batches * (replicas // pipelines))
        if gather is not None:
            dataset = dataset.map(gather)
        if prefetch:
            dataset = dataset.prefetch(tf.data.AUTOTUNE)
        options = tf.data.Options()
        options.deterministic = True
        return dataset.with_options(options)

    return input_fn
