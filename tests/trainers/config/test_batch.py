"""`batch`: a --batch_size that does not split over the replicas, or is larger than a training
set, is refused naming the flag, the set, its size and the largest batch that fits."""

import pytest

from trainers.config import batch
from trainers.config.flags import Config, ConfigError

SET = "--dataset=folder:/data/shapes"


@pytest.mark.parametrize("batch_size, pack, replicas, size", [
    (5, 1, 1, 5),  # the whole set in one batch
    (4, 2, 2, 5),
    (10**8, 1, 2, None),  # an endless stream (a toy) or a size nobody knows
])
def test_a_batch_within_the_set_that_splits_over_the_replicas_is_accepted(batch_size, pack,
                                                                          replicas, size):
    config = Config(batch_size=batch_size, pack=pack)
    batch.check_split(config, replicas)
    batch.check_fits(config, SET, size, replicas)


@pytest.mark.parametrize("batch_size, pack, replicas, size, fix", [
    (8, 1, 1, 5, "use --batch_size=5 or less."),
    (100_000_000, 1, 1, 60_000, "use --batch_size=60000 or less."),
    (8, 1, 2, 7, "use --batch_size=6 or less."),  # a whole batch per replica
    (8, 2, 2, 7, "use --batch_size=4 or less."),  # ... in whole packs
])
def test_a_batch_larger_than_the_set_is_refused_with_the_largest_that_fits(batch_size, pack,
                                                                           replicas, size, fix):
    with pytest.raises(ConfigError) as error:
        batch.check_fits(Config(batch_size=batch_size, pack=pack), SET, size, replicas)
    assert str(error.value) == (
        f"--batch_size={batch_size} is larger than the training set: {SET} has {size} examples, "
        f"and a larger batch would hold some twice; {fix}")


@pytest.mark.parametrize("pack, size, share", [
    (1, 1, "1 example, and a larger batch would hold some twice; no batch fits, as each of the 2 "
           "replicas needs one example of its own"),
    (2, 3, "3 examples, and a larger batch would hold some twice; no batch fits, as each of the "
           "2 replicas needs a pack of 2 (--pack) of its own"),
])
def test_a_set_smaller_than_one_share_per_replica_fits_no_batch(pack, size, share):
    with pytest.raises(ConfigError) as error:
        batch.check_fits(Config(batch_size=2 * pack, pack=pack), SET, size, replicas=2)
    assert str(error.value) == (
        f"--batch_size={2 * pack} is larger than the training set: {SET} has {share}: train on "
        "fewer replicas (--cpu_replicas, workers) or on more data.")


@pytest.mark.parametrize("batch_size, pack, message", [
    (1, 1, "--batch_size=1 is not divisible by the 2 replicas; use a multiple of it."),
    (6, 2, "--pack=2: each of the 2 replicas gets 3 examples, which do not split into packs of 2; "
           "use a --batch_size that is a multiple of 4."),
])
def test_a_batch_that_leaves_a_replica_short_is_refused(batch_size, pack, message):
    with pytest.raises(ConfigError) as error:
        batch.check_split(Config(batch_size=batch_size, pack=pack), replicas=2)
    assert str(error.value) == message
