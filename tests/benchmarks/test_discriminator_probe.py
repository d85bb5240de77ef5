"""`benchmarks/discriminator_probe.py` and `benchmarks/r3gan_parts.py`: case parsing, window
means, a probe that trains (the loss falls from log 2 on separable data), and R3GAN's narrow
networks through the user-network contract."""

import math

import argparse
import numpy as np
import pytest

from benchmarks import discriminator_probe, r3gan_parts


def test_parse_case_reads_label_arch_width_blocks_rate_and_gamma():
    assert discriminator_probe.parse_case("a b: r3gan,16,1,8e-4,0.05") == (
        "a b", "r3gan", 16, 1, 8e-4, 0.05)
    for text in ("no colon", "x: resnet,16,1,2e-4,0", "x: r3gan,16,1,2e-4", ": dcgan,64,1,1,0"):
        with pytest.raises(argparse.ArgumentTypeError, match="--case"):
            discriminator_probe.parse_case(text)


def test_window_means_average_each_window_of_steps():
    assert discriminator_probe.window_means([0, 2, 4, 6], ((0, 2), (2, 4))) == [1.0, 5.0]


@pytest.mark.parametrize("arch,width", [("dcgan", 8), ("r3gan", 16)])
def test_a_probe_starts_at_log_two_and_learns_a_split_no_linear_function_makes(arch, width):
    """Images all +0.8 or all -0.8: half the blends are 0, with the reals' mean, so only a
    nonlinear function of the pixels tells them apart."""
    signs = np.where(np.arange(16) % 2, 0.8, -0.8).astype(np.float32)
    images = np.broadcast_to(signs[:, None, None, None], (16, 28, 28, 1)).copy()
    losses = discriminator_probe.probe(arch, width, 1, 1e-3, 0.0, images, steps=60, batch=16,
                                       seed=0)
    assert len(losses) == 60 and abs(losses[0] - math.log(2)) < 0.05
    assert np.mean(losses[-10:]) < min(0.75 * math.log(2), np.mean(losses[:10]))


@pytest.mark.parametrize("network", ["generator", "discriminator"])
def test_r3gan_parts_build_the_narrow_networks_through_the_user_network_contract(network):
    model = getattr(r3gan_parts, network)(latent_dim=32, shape=(28, 28, 1), num_classes=10,
                                          classifier=None)
    blocks = [layer.name for layer in model.layers if layer.name.endswith("_add")]
    assert len(blocks) == 3  # three stages (7, 14, 28 px), one block each
    inputs = np.zeros((2, 32) if network == "generator" else (2, 28, 28, 1), np.float32)
    assert model(inputs).shape == ((2, 28, 28, 1) if network == "generator" else (2, 1))
    widest = max(layer.output.shape[-1] for layer in model.layers if layer.name.endswith("_add"))
    assert widest == 4 * r3gan_parts.WIDTH
