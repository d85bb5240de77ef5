"""`AdversarialSetup`: the base of setups whose models play generator and discriminator roles.

It writes down the part of the Setup protocol that such setups share, beyond `Setup`:

- `generator(config, info, name)` and `discriminator(config, info)`: the network of a role,
  the user's (`--generator`, `--discriminator`; `user_networks`) when the run names one, else
  the setup's own (`builtin_generator`, `builtin_discriminator`, which a subclass implements).
  A setup may build several models of one role (an EMA twin, two generators): each is named by
  `name`, and a user network fills each of them.
- `network_roles`: the roles a user network may fill; each is also the name of the model that
  holds it (LOGDIR/networks/<role>.keras is saved from that model). A setup whose models have
  other names drops the role.
- `conditioning(config, info)`: how labels enter the networks and losses
  (`adversarial.Conditioning`), which also fixes a user network's call contract.
- `learning_rates`: `--g_lr`/`--g_lr_schedule` for the optimizers of `generator_optimizers`,
  `--d_lr`/`--d_lr_schedule` for those of `discriminator_optimizers`
  (`building.adversarial_rates`).

TensorFlow, Keras and `gan/` are imported inside the hooks (see `protocol`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping

from trainers.config.flags import Config
from trainers.setups.protocol import LearningRate, Setup

if TYPE_CHECKING:
    import keras

    from datasets.registry import DatasetInfo
    from trainers.setups.adversarial import Conditioning


class AdversarialSetup(Setup):
    """A setup with generator and discriminator roles (see the module docstring). Subclasses
    implement `builtin_generator` and `builtin_discriminator` and call `generator` and
    `discriminator` in `build`."""

    network_roles = ("generator", "discriminator")
    # The optimizers (`Phase.optimizers` names) trained at the generators' and the
    # discriminators' rates.
    generator_optimizers: tuple[str, ...] = ("generator",)
    discriminator_optimizers: tuple[str, ...] = ("discriminator",)

    def conditioning(self, config: Config, info: DatasetInfo) -> Conditioning:
        """How labels enter the networks and losses: not at all by default."""
        from trainers.setups.adversarial import Conditioning
        return Conditioning()

    def generator(self, config: Config, info: DatasetInfo, name: str) -> keras.Model:
        """The generator named `name`: the user's `--generator`, else `builtin_generator`."""
        if config.generator:
            return self.user_network(config, info, "generator")
        return self.builtin_generator(config, info, name)

    def discriminator(self, config: Config, info: DatasetInfo) -> keras.Model:
        """The discriminator: the user's `--discriminator`, else `builtin_discriminator`."""
        if config.discriminator:
            return self.user_network(config, info, "discriminator")
        return self.builtin_discriminator(config, info)

    def builtin_generator(self, config: Config, info: DatasetInfo, name: str) -> keras.Model:
        """The setup's own generator named `name`."""
        raise NotImplementedError(f"{type(self).__name__} must implement builtin_generator().")

    def builtin_discriminator(self, config: Config, info: DatasetInfo) -> keras.Model:
        """The setup's own discriminator."""
        raise NotImplementedError(f"{type(self).__name__} must implement builtin_discriminator().")

    def user_network(self, config: Config, info: DatasetInfo, role: str) -> keras.Model:
        """The user's network for `role` (`user_networks.build`), with the call contract of
        this run's `conditioning`."""
        from trainers.setups import user_networks
        conditioning = self.conditioning(config, info)
        return user_networks.build(config, role, shape=info.shape,
                                   num_classes=conditioning.num_classes,
                                   classifier=conditioning.classifier)

    def learning_rates(self, config: Config) -> Mapping[str, LearningRate]:
        from trainers.setups import building
        return building.adversarial_rates(config, self.generator_optimizers,
                                          self.discriminator_optimizers)
