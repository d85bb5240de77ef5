"""Class-conditional setups: `--setup=cgan` (`ConditionalGAN`, projection discriminator) and
`--setup=acgan` (`AuxiliaryClassifierGAN`, a subclass with a class head on the discriminator).

Both are `gans.GAN` with labels added (`adversarial.Conditioning`), on labelled
images only: the discriminator sees real images with their dataset labels and fakes generated
for labels drawn uniformly over the classes; the generator step draws its own labels and noise.
DiffAugment, the `--penalty` R1/R2/DRAGAN (also lazily), consistency regularization, weight and
gradient clipping, the EMA generator, top-k and `--update_order=simultaneous` work as in the
unconditional setups.

- cgan (Miyato & Koyama 2018): conditional batch norm in the generator, projection
  discriminator D(x, y); `--loss` (hinge in the preset) on D(x, y).
- acgan (Odena et al. 2017): label one-hot next to the noise, discriminator with a class head.
  D minimises adversarial + aux_weight * (CE(real class) + CE(fake class)), G minimises
  adversarial + aux_weight * CE(the class it was asked for); the class losses and accuracies
  are reported as phase metrics. `--aux_weight` is acgan's flag alone.

Samples, evaluation and export take the class (the unconditional hooks, through
`Conditioning`): `--label` picks one for `--mode=sample`, the metrics add intra-FID and class
accuracy, and the exported signatures take labels.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainers.config.choices import INTERPOLATING_PENALTIES
from trainers.config.flags import Config, ConfigError, Flag, declare
from trainers.setups import kinds
from trainers.setups.protocol import Built
from trainers.setups.gans import GAN

if TYPE_CHECKING:
    import keras

    from datasets.registry import DatasetInfo
    from trainers.engine.controller import PeriodicAction
    from trainers.setups.adversarial import Conditioning

declare(
    "conditional",
    Flag('label', str, '',
         help='Conditional --setup (cgan, acgan): --mode=sample draws only this class (index or name,'
              ' e.g. 7 or Sneaker); empty: one row per class.',
         hparam=False),
)
declare(
    "acgan",
    Flag('aux_weight', float, 1.0,
         help='acgan: weight of the auxiliary classification losses.'),
)

# Miyato & Koyama 2018: projection discriminator with spectral norm, conditional batch norm in the
# generator, hinge loss, Adam 2e-4.
CGAN_PRESETS = {"cgan": dict(loss="hinge", optimizer="adam", g_lr=2e-4, d_lr=2e-4, beta1=0.5,
                             beta2=0.999, d_updates=1, d_spectral_norm=True)}
# Odena et al. 2017: non-saturating loss plus an auxiliary classifier on D, Adam 2e-4, 0.5.
ACGAN_PRESETS = {"acgan": dict(loss="non_saturating", optimizer="adam", g_lr=2e-4, d_lr=2e-4,
                               beta1=0.5, beta2=0.999, d_updates=1)}
# Columns of the class-by-noise grid written every --image_every cycles.
CLASS_GRID_COLUMNS = 10


class ConditionalGAN(GAN):
    """cgan: conditional batch norm in G, a projection D (see the module docstring)."""

    presets = CGAN_PRESETS
    flag_owners = (*GAN.flag_owners, "conditional")
    metrics = GAN.metrics + ("intra_fid", "class_accuracy")

    # The `gan.architectures.Architecture` fields of its networks' builders.
    generator_builder, discriminator_builder = "conditional_generator", "projection_discriminator"

    def check_flags(self, config: Config) -> None:
        if config.pack != 1:
            raise ConfigError(f"--pack={config.pack!r} is invalid: --setup={config.setup} has its own "
                              "discriminators without packing; use --pack=1.")
        if config.penalty in INTERPOLATING_PENALTIES:
            raise ConfigError(
                f"--penalty={config.penalty!r} is not supported with --setup={config.setup}: it scores "
                "interpolates between a real image of one class and a fake of another, which have "
                "no label; use --penalty=r1, r2 or dragan, or none.")

    def check_data(self, config: Config, info: DatasetInfo, num_replicas: int = 1) -> None:
        instead = kinds.get(info.kind).without_labelled_images(info)
        if instead:
            raise ConfigError(
                f"--setup={config.setup} is class-conditional and needs labelled images, but "
                f"--dataset={config.dataset!r} has {instead}; use --dataset=fashion_mnist or a "
                "labelled tfds:<name>, or an unconditional --setup such as dcgan or sngan.")
        super().check_data(config, info, num_replicas)

    def conditioning(self, config: Config, info: DatasetInfo) -> Conditioning:
        from trainers.setups.adversarial import Conditioning
        return Conditioning(num_classes=info.num_classes)

    def builtin_generator(self, config: Config, info: DatasetInfo, name: str) -> keras.Model:
        return kinds.image_generator(config, info, name, self.generator_builder,
                                     num_classes=info.num_classes)

    def builtin_discriminator(self, config: Config, info: DatasetInfo) -> keras.Model:
        return kinds.image_discriminator(config, info, self.discriminator_builder,
                                         num_classes=info.num_classes)

    def summaries(self, config: Config, built: Built, info: DatasetInfo) -> list[PeriodicAction]:
        """The balanced-label sample grid, and "samples_by_class": row r shows class r, column
        c one fixed noise vector for every class, so a column shows what only the label
        changes."""
        from trainers.outputs import actions
        from trainers.setups import draws
        noise, labels = draws.class_grid(
            draws.fixed_noise(config, built.sampling.latent_shape, CLASS_GRID_COLUMNS),
            info.num_classes)
        labeled = self.conditioning(config, info).labeled_sampler(
            built.models[built.sampling.model])
        return [*super().summaries(config, built, info), actions.sample_summaries(
            name="samples_by_class", every=config.image_every, noise=noise,
            sample=lambda z: labeled(z, labels),
            write=actions.image_grid_writer("samples_by_class", rows=info.num_classes))]


class AuxiliaryClassifierGAN(ConditionalGAN):
    """acgan: the one-hot label next to G's noise, a class head on D, and the auxiliary class
    losses weighted by `--aux_weight` (see the module docstring)."""

    presets = ACGAN_PRESETS
    flag_owners = (*ConditionalGAN.flag_owners, "acgan")
    generator_builder, discriminator_builder = "acgan_generator", "acgan_discriminator"

    def conditioning(self, config: Config, info: DatasetInfo) -> Conditioning:
        from trainers.setups.adversarial import Conditioning
        return Conditioning(num_classes=info.num_classes, classifier=True)
