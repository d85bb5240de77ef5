"""The image network families by name (`--arch`): each name gives the six builders a setup
needs, unconditional and class-conditional.

Every builder of one family takes the same keywords: `resolution`, `channels`, `width`, `name`,
`latent_dim` (generators), `num_classes` (conditional ones), `pack` (the unconditional
discriminator), plus the family's own `generator_options` and `discriminator_options`, which only
it understands (DCGAN's extra blocks, upsampling, normalization and dropout; spectral
normalization, which R3GAN's zero-initialised convolutions rule out; R3GAN's blocks per stage,
expansion and group width). The names are `gan.architecture_names`' (importable without Keras,
for `--arch`'s choices); the table must hold exactly those, in that order (`check_names`).
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import keras

from gan import architecture_names, conditional, networks, r3gan, resnet

Builder = Callable[..., keras.Model]


@dataclasses.dataclass(frozen=True)
class Architecture:
    """One family's builders (see the module docstring)."""

    generator: Builder
    discriminator: Builder
    conditional_generator: Builder  # cGAN: conditional batch norm (R3GAN: one-hot label input)
    acgan_generator: Builder  # AC-GAN: one-hot label next to the noise
    projection_discriminator: Builder  # cGAN
    acgan_discriminator: Builder  # AC-GAN: class head
    generator_options: tuple[str, ...] = ()
    discriminator_options: tuple[str, ...] = ()


R3GAN_OPTIONS = ("blocks_per_stage", "expansion", "group_width")

ARCHITECTURES = {
    "dcgan": Architecture(
        generator=networks.dcgan_generator, discriminator=networks.dcgan_discriminator,
        conditional_generator=conditional.conditional_generator,
        acgan_generator=conditional.acgan_generator,
        projection_discriminator=conditional.projection_discriminator,
        acgan_discriminator=conditional.acgan_discriminator,
        generator_options=("extra_blocks", "upsample"),
        discriminator_options=("normalization", "dropout", "extra_blocks", "spectral_norm")),
    "resnet": Architecture(
        generator=resnet.generator, discriminator=resnet.discriminator,
        conditional_generator=resnet.conditional_generator,
        acgan_generator=resnet.acgan_generator,
        projection_discriminator=resnet.projection_discriminator,
        acgan_discriminator=resnet.acgan_discriminator,
        discriminator_options=("spectral_norm",)),
    "r3gan": Architecture(
        generator=r3gan.generator, discriminator=r3gan.discriminator,
        conditional_generator=r3gan.conditional_generator,
        acgan_generator=r3gan.conditional_generator,
        projection_discriminator=r3gan.projection_discriminator,
        acgan_discriminator=r3gan.acgan_discriminator,
        generator_options=R3GAN_OPTIONS, discriminator_options=R3GAN_OPTIONS),
}


def check_names(table: dict[str, Architecture]) -> None:
    """ImportError unless `table` names exactly the families of `architecture_names.NAMES`, in
    that order: `--arch` offers those names, and each must have builders."""
    if tuple(table) != architecture_names.NAMES:
        raise ImportError(f"gan.architectures builds the families {tuple(table)} but "
                          f"gan.architecture_names.NAMES lists {architecture_names.NAMES}: "
                          "add or remove the name there too.")


check_names(ARCHITECTURES)
