"""`--checkpoint=N`: sample, eval, export and `api.load_generator` read the kept checkpoint of step N; a step that is
not kept is refused, listing the kept ones."""

import numpy as np
import pytest

from trainers import api
from trainers.config.flags import ConfigError


@pytest.fixture(scope="module")
def logdir(tmp_path_factory):
    """A ring8 run of 6 cycles checkpointed every 2, keeping the last 2: steps 4 and 6."""
    logdir = tmp_path_factory.mktemp("steps") / "run"
    api.train(api.config(dataset="ring8", batch_size=16, latent_dim=4, cycles_per_loop=2,
                         shuffle_buffer=64, train_cycles=6, checkpoint_every=2, keep_checkpoints=2,
                         image_every=0, histogram_every=0, logdir=str(logdir)))
    return logdir


def test_sample_eval_and_export_read_the_step_asked_for(logdir, tmp_path):
    earlier = api.sample(str(logdir), checkpoint="4", num_samples=8, output=str(tmp_path / "4.npy"))
    latest = api.sample(str(logdir), num_samples=8, output=str(tmp_path / "latest.npy"))
    np.testing.assert_array_equal(np.load(tmp_path / "4.npy"), earlier)
    np.testing.assert_array_equal(np.load(tmp_path / "latest.npy"), latest)
    assert not np.array_equal(earlier, latest)
    at_4 = api.load_generator(str(logdir), checkpoint="4").get_weights()
    at_6 = api.load_generator(str(logdir)).get_weights()
    assert any(not np.array_equal(a, b) for a, b in zip(at_4, at_6))
    assert api.evaluate(str(logdir), checkpoint="4")["step"] == 4
    exported = api.export(str(logdir), checkpoint="4", export_dir=str(tmp_path / "export"))
    assert exported.path == str(tmp_path / "export" / "generator" / "4")


def test_a_step_not_kept_is_refused_listing_the_kept_steps(logdir, tmp_path):
    with pytest.raises(ConfigError, match=(
            rf"--checkpoint=2: {logdir}/checkpoints keeps no checkpoint of step 2; the kept steps "
            r"are 4, 6\. Use one of them, or latest or best")):
        api.sample(str(logdir), checkpoint="2", output=str(tmp_path / "2.npy"))
    assert not (tmp_path / "2.npy").exists()
