"""What every generator/discriminator setup on images or toys does: `GAN`, the base of
`UnconditionalGAN` (dcgan, wgan, wgan_gp, lsgan, sngan, r1) and `ConditionalGAN` (cgan, acgan),
so neither setup module imports the other.

The phases are `adversarial.adversarial_phases`. Whatever depends on the data is its kind's
(`kinds.get(info.kind)`): on an image dataset the networks are the convolutional ones of `--arch`
(DCGAN or ResNet, `gan.architectures`) and the metrics FID and its kin; on the 2-D toys (ring8,
grid25) they are MLPs, samples are drawn as scatter plots over the true modes, and the metrics
are modes captured and high-quality samples. `GAN` holds what every kind shares: the
differential-privacy checks, the phases, the EMA generator, the sample draws and the export's
signatures; the user's networks and the rates are its base's
(`adversarial_setup.AdversarialSetup`); labels come from `conditioning`, which `ConditionalGAN`
overrides.

TensorFlow and `gan/` are imported inside the hooks (see `protocol`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trainers.config.flags import Config, ConfigError
from trainers.setups import kinds
from trainers.setups.adversarial_setup import AdversarialSetup
from trainers.setups.protocol import Built, Export, Parts, PeriodicEvaluation, Restored, Sampling

if TYPE_CHECKING:
    import keras

    from datasets.registry import DatasetInfo
    from trainers.engine.controller import PeriodicAction


def refuse_mixing_layers(discriminator: keras.Model) -> None:
    """Differential privacy clips per-example gradients: a discriminator (the user's own,
    --discriminator) whose batch norm mixes examples is refused."""
    import keras

    def layers(model):
        for layer in getattr(model, "layers", ()):
            yield layer
            yield from layers(layer)

    mixing = [layer.name for layer in layers(discriminator)
              if isinstance(layer, keras.layers.BatchNormalization)]
    if mixing:
        raise ConfigError(
            "--dp_l2_clip: the discriminator's batch norm layers "
            f"{mixing} mix the examples of a batch, which breaks per-example differential "
            "privacy; use a discriminator without batch norm (layer norm, or none).")


class GAN(AdversarialSetup):
    """A generator against a discriminator on any kind of data (see the module docstring)."""

    flag_owners = kinds.GAN_FLAG_OWNERS
    metrics = tuple(name for kind in kinds.KINDS.values() for name in kind.metrics)

    # -- data -------------------------------------------------------------------------------

    def check_data(self, config: Config, info: DatasetInfo, num_replicas: int = 1) -> None:
        from gan import augment
        try:
            augment.parse_policy(config.diffaugment)
        except ValueError as error:
            raise ConfigError(str(error)) from None
        if config.dp_l2_clip and not info.num_examples:
            raise ConfigError(
                f"--dp_l2_clip={config.dp_l2_clip!r}: differential privacy is accounted over a "
                f"finite training set, and dataset {config.dataset!r} has no fixed number of "
                "examples; train on an image dataset, or drop the --dp_* flags.")
        microbatches = config.dp_microbatches or config.batch_size
        if config.dp_l2_clip and microbatches % num_replicas:
            # Validation checks --cpu_replicas; only the strategy knows the workers' replicas.
            raise ConfigError(
                f"--dp_microbatches={config.dp_microbatches}: the {microbatches} microbatches of "
                f"a batch must split evenly over the {num_replicas} replicas of all workers; "
                f"use a multiple of {num_replicas} (0 means one per example).")
        kinds.get(info.kind).check_data(config, info, num_replicas)

    # -- building ---------------------------------------------------------------------------

    def builtin_generator(self, config: Config, info: DatasetInfo, name: str) -> keras.Model:
        """The data kind's generator: --arch's for images, an MLP for a toy."""
        return kinds.get(info.kind).generator(config, info, name)

    def builtin_discriminator(self, config: Config, info: DatasetInfo) -> keras.Model:
        """The data kind's discriminator: --arch's for images, an MLP for a toy."""
        return kinds.get(info.kind).discriminator(config, info)

    def build(self, config: Config, info: DatasetInfo) -> Parts:
        import tensorflow as tf

        from trainers.setups import adversarial, building
        self.check_data(config, info)
        conditioning = self.conditioning(config, info)
        use_ema = config.ema_halflife_kimg > 0
        weights = {"penalty": tf.Variable(float(config.penalty_weight), trainable=False,
                                          name="penalty_weight")}
        if conditioning.classifier:
            weights["aux"] = tf.Variable(float(config.aux_weight), trainable=False, name="aux_weight")
        progress = building.train_time_progress(config)
        phases = adversarial.adversarial_phases(
            config, config.latent_dim, conditioning=conditioning, penalty_weight=weights["penalty"],
            aux_weight=weights.get("aux"), time_progress=progress,
            generator_after_update=building.ema_updater(config, progress) if use_ema else None)
        models = {"generator": self.generator(config, info, "generator"),
                  "discriminator": self.discriminator(config, info)}
        if use_ema:
            models["generator_ema"] = self.generator(config, info, "generator_ema")
            models["generator_ema"].set_weights(models["generator"].get_weights())
        if config.dp_l2_clip:
            refuse_mixing_layers(models["discriminator"])
        sampler = "generator_ema" if use_ema and config.use_ema else "generator"
        return Parts(models=models, phases=phases, loss_weights=weights, sampling=Sampling(
            latent_shape=(config.latent_dim,), sample=conditioning.sampler(models[sampler]),
            model=sampler), train_time_progress=progress)

    # -- training outputs -------------------------------------------------------------------

    def summaries(self, config: Config, built: Built, info: DatasetInfo) -> list[PeriodicAction]:
        from trainers.outputs import actions
        from trainers.setups import draws
        kind, sampling = kinds.get(info.kind), built.sampling
        return [actions.sample_summaries(
            every=config.image_every, sample=sampling.sample,
            write=kind.summary_writer("samples", info),
            noise=draws.fixed_noise(config, sampling.latent_shape, kind.summary_samples))]

    def periodic_evaluation(self, config: Config, built: Built,
                            info: DatasetInfo) -> PeriodicEvaluation:
        return kinds.get(info.kind).periodic_evaluation(config, built, info,
                                                        self.conditioning(config, info))

    # -- sample, eval, export -----------------------------------------------------------------

    def sample(self, config: Config, restored: Restored) -> int:
        from trainers.setups import draws
        sampling, info = restored.built.sampling, restored.info
        kind = kinds.get(info.kind)
        kind.check_sample(config, restored)
        conditioning = self.conditioning(restored.run, info)
        label = draws.requested_label(config, run=restored.run, num_classes=conditioning.num_classes,
                                      class_names=info.class_names)
        draw = draws.plan_draw(config, latent_shape=sampling.latent_shape,
                               num_classes=conditioning.num_classes, label=label)
        if draw.labels is None:
            outputs = sampling.sample(draw.noise).numpy()
        else:
            outputs = conditioning.labeled_sampler(restored.built.models[sampling.model])(
                draw.noise, draw.labels).numpy()
        kind.save_samples(outputs, config.output, info, rows=draw.rows)
        return len(outputs)

    def evaluate(self, config: Config, run: Config, restored: Restored | None) -> dict[str, Any]:
        info = self.dataset_info(run)
        return kinds.get(info.kind).evaluate(config, run, info, restored,
                                             self.conditioning(run, info))

    def export_archive(self, config: Config, restored: Restored) -> Export:
        from trainers.setups import draws
        sampling, info = restored.built.sampling, restored.info
        num_classes = self.conditioning(restored.run, info).num_classes
        latent_dim = sampling.latent_shape[0]
        archive = build_archive(restored.built.models[sampling.model], kind=info.kind,
                                latent_dim=latent_dim, num_classes=num_classes)
        metadata = {
            "kind": info.kind, "latent_dim": latent_dim, "output_shape": list(info.shape),
            "signatures": {"serving_default": ["noise"], "seed": ["seed", "count"]},
            "noise": "tf.random.stateless_normal([count, latent_dim], "
                     f"seed=[seed, {draws.SAMPLE_NOISE_SALT}])"}
        if num_classes:
            metadata.update(num_classes=num_classes,
                            class_names=list(info.class_names) if info.class_names else None,
                            signatures={"serving_default": ["noise", "labels"],
                                        "seed": ["seed", "count", "label"]})
        return Export(archive=archive, model=sampling.model, metadata=metadata)


def build_archive(generator: keras.Model, *, kind: str, latent_dim: int,
                  num_classes: int = 0) -> keras.export.ExportArchive:
    """The generator with two endpoints: `serving_default` (`noise` float32 [N, latent_dim] ->
    the outputs of the data kind named `kind` (`kinds.get`; `DataKind.served`): `images` uint8
    [N, H, W, C] for images, `points` float32 [N, 2] for a toy) and
    `seed` (`seed` int64, `count` int32 -> the outputs for the noise `--mode=sample --seed=SEED
    --num_samples=COUNT` draws). With `num_classes` > 0 the generator is conditional, called as
    generator([noise, labels]): `serving_default` adds `labels` int32 [N], `seed` adds `label`
    int32 (every sample of that class). Labels outside [0, num_classes) are not checked in the
    graph (the class input becomes all zeros).

    Keras's ExportArchive, not a bare tf.Module: it saves Keras 3 variables so that the TFLite
    converter freezes them into the model (from a tf.Module it leaves unfed variable reads).
    """
    import keras
    import tensorflow as tf

    from trainers.setups import draws
    if num_classes < 0:
        raise ValueError(f"build_archive needs num_classes >= 0, got {num_classes!r}.")
    outputs = kinds.get(kind).served
    noise_spec = tf.TensorSpec([None, latent_dim], tf.float32, name="noise")
    seed_specs = [tf.TensorSpec([], tf.int64, name="seed"),
                  tf.TensorSpec([], tf.int32, name="count")]
    archive = keras.export.ExportArchive()
    archive.track(generator)
    if num_classes:
        def serve(noise, labels):
            return outputs(generator([noise, labels], training=False))

        def seeded(seed, count, label):
            return serve(draws.sample_noise(seed, count, (latent_dim,)), tf.fill([count], label))

        archive.add_endpoint("serving_default", serve, input_signature=[
            noise_spec, tf.TensorSpec([None], tf.int32, name="labels")])
        archive.add_endpoint("seed", seeded, input_signature=[
            *seed_specs, tf.TensorSpec([], tf.int32, name="label")])
        return archive

    def serve(noise):
        return outputs(generator(noise, training=False))

    def seeded(seed, count):
        return serve(draws.sample_noise(seed, count, (latent_dim,)))

    archive.add_endpoint("serving_default", serve, input_signature=[noise_spec])
    archive.add_endpoint("seed", seeded, input_signature=seed_specs)
    return archive
