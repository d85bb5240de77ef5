"""From unbatched examples to the per-replica batches a distributed GAN step consumes.

Each stage, in order, and why:
  shard     with several input pipelines (multi-worker), each reads a disjoint 1/n of the data;
  cache     finite data only: decoding and resizing happen once, not every epoch. The cache
            holds the preprocessed float32 images (Fashion-MNIST at 28x28: ~190 MB);
  shuffle   finite data only, seeded, with reshuffle_each_iteration=True: a new order every
            epoch, yet the whole stream of epochs is a pure function of `seed`;
  repeat    finite data only: training runs by steps, not epochs;
  batch     per-replica size, drop_remainder=True so shapes are static (one XLA/tf.function
            trace) and every replica gets a full batch;
  skip      resume: a distributed iterator cannot be checkpointed, so a restarted run rebuilds
            the identical stream and drops the batches the run already consumed. It costs
            producing those batches (a few seconds per million examples on 2 CPU cores),
            not a replay of training;
  prefetch  overlaps input with the training step.
Infinite streams (the toys) are already random and cannot be cached, so they are only sharded,
batched and skipped. They must say so through their cardinality (INFINITE): anything else is
treated as finite and cached. Options: deterministic=True, so parallel stages keep their order
and the resume contract holds.

Unpaired data (CycleGAN's two domains): `examples_fn` returns a mapping {name: dataset}. Each
member goes through shard, cache, shuffle (with its own seed) and repeat on its own, and the
endless streams are zipped into examples {name: element} before batching. So the pairing is
new every epoch, domains of different sizes each cycle through all their examples, and the
zipped stream is again a pure function of `seed` that `skip` resumes.

Resume contract: the caller counts global batches (one per-replica batch for every replica).
With P input pipelines and R replicas in sync each global batch takes R/P batches from every
pipeline, so `skip_global_batches=g` makes each pipeline start at its batch g*R/P: exactly where
the same pipeline, built with the same arguments and 0, stood after g global batches.
"""

from typing import Callable, Mapping

import tensorflow as tf

InputFn = Callable[[tf.distribute.InputContext], tf.data.Dataset]
Examples = tf.data.Dataset | Mapping[str, tf.data.Dataset]


def training_input_fn(
    examples_fn: Callable[[], Examples],
    *,
    global_batch_size: int,
    seed: int,
    shuffle_buffer: int = 10_000,
    skip_global_batches: int = 0,
    cache: bool = True,
) -> InputFn:
    """An input function for `strategy.distribute_datasets_from_function` (see module docstring).

    examples_fn builds the unbatched examples (e.g. a `registry.load_split` call), or a mapping
    of finite datasets to zip unpaired; it is called once per input pipeline, inside the
    function, so each pipeline owns its dataset.
    """
    if global_batch_size < 1:
        raise ValueError(f"global_batch_size={global_batch_size} must be at least 1.")
    if shuffle_buffer < 1:
        raise ValueError(f"shuffle_buffer={shuffle_buffer} must be at least 1.")
    if skip_global_batches < 0:
        raise ValueError(
            f"skip_global_batches={skip_global_batches} must be 0 (fresh run) or more (resume)."
        )

    def input_fn(input_context: tf.distribute.InputContext) -> tf.data.Dataset:
        batch_size = input_context.get_per_replica_batch_size(global_batch_size)
        replicas, pipelines = input_context.num_replicas_in_sync, input_context.num_input_pipelines
        if replicas % pipelines:
            raise ValueError(
                f"{replicas} replicas cannot be spread evenly over {pipelines} input pipelines."
            )

        def endless(dataset: tf.data.Dataset, stream_seed: int) -> tf.data.Dataset:
            if pipelines > 1:
                dataset = dataset.shard(pipelines, input_context.input_pipeline_id)
            if dataset.cardinality() == tf.data.INFINITE_CARDINALITY:
                return dataset
            if cache:
                dataset = dataset.cache()
            dataset = dataset.shuffle(shuffle_buffer, seed=stream_seed, reshuffle_each_iteration=True)
            return dataset.repeat()

        examples = examples_fn()
        if isinstance(examples, Mapping):
            # Member i (by sorted name) is shuffled with seed + i: independent orders, whatever
            # order the mapping lists them in.
            dataset = tf.data.Dataset.zip({name: endless(examples[name], seed + index)
                                           for index, name in enumerate(sorted(examples))})
        else:
            dataset = endless(examples, seed)
        dataset = dataset.batch(batch_size, drop_remainder=True)
        dataset = dataset.skip(skip_global_batches * (replicas // pipelines))
        dataset = dataset.prefetch(tf.data.AUTOTUNE)
        options = tf.data.Options()
        options.deterministic = True
        return dataset.with_options(options)

    return input_fn

