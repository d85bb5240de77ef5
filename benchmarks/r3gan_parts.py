"""R3GAN's narrow networks as user networks (`--generator` / `--discriminator`), so one
`benchmarks/quality.py` row can pair R3GAN's generator with DCGAN's discriminator or the
reverse, and tell which of the two learns slowly:

    python benchmarks/quality.py --minutes 5 --no_reference \\
        --row "dcgan G, r3gan D: --setup=r3gan --discriminator=benchmarks.r3gan_parts:discriminator"

Both are `--arch=r3gan --g_width=16 --d_width=16 --r3gan_blocks=1` (benchmarks/results/r3gan.md).
A user network keeps its own dtype policy, so such a run trains in float32 (`--precision=auto`).
"""

from __future__ import annotations

from gan import r3gan

WIDTH, BLOCKS_PER_STAGE = 16, 1


def generator(*, latent_dim: int, shape: tuple[int, ...], **unused):
    """R3GAN's generator, 16 wide, one block a stage."""
    return r3gan.generator(resolution=shape[0], channels=shape[-1], latent_dim=latent_dim,
                           width=WIDTH, blocks_per_stage=BLOCKS_PER_STAGE)


def discriminator(*, shape: tuple[int, ...], **unused):
    """R3GAN's discriminator, 16 wide, one block a stage."""
    return r3gan.discriminator(resolution=shape[0], channels=shape[-1], width=WIDTH,
                               blocks_per_stage=BLOCKS_PER_STAGE)
