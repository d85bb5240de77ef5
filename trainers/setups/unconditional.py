"""Generator against discriminator, unconditional: dcgan, wgan, wgan_gp, lsgan, sngan, r1.

The presets differ only in their hyper-parameters; the phases are `adversarial.adversarial_phases`.
On an image dataset the networks are the convolutional ones of `--arch` (DCGAN or ResNet,
`gan.architectures`); on the 2-D toys (ring8,
grid25) they are MLPs, samples are drawn as scatter plots over the true modes, and the metrics
are modes captured and high-quality samples instead of FID. `ConditionalGAN` (conditional.py)
extends this class with labels.

TensorFlow and `gan/` are imported inside the hooks (see `protocol`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trainers.config.fields import Config, ConfigError
from trainers.setups.protocol import Built, Export, Restored, Scorer, Setup

if TYPE_CHECKING:
    import keras
    import tensorflow as tf

    from datasets.registry import DatasetInfo
    from trainers.engine.controller import PeriodicAction
    from trainers.setups.adversarial import Conditioning

PRESETS = {
    # Radford et al. 2016 with the non-saturating loss; Adam 2e-4, beta1 0.5. Tuned for sample
    # quality at equal wall clock on Fashion-MNIST (benchmarks/results/quality.md): batch 32,
    # not the paper's 128 (twice the updates per image); the generator at four times D's rate
    # (8e-4); top-k generator training keeping half the fakes after 5,000 cycles; both rates
    # held for 10,000 cycles, then falling as 1 / sqrt(cycle): at constant rates a 60-minute
    # run drifts (FID best at 20-30 minutes, then 18.6-22.6 at 60), while the default run's
    # 6,000 cycles and most of a 10-minute run train exactly as at constant rates ("Long runs").
    "dcgan": dict(loss="non_saturating", optimizer="adam", g_lr=8e-4, d_lr=2e-4,
                    beta1=0.5, beta2=0.999, d_steps=1, batch_size=32, topk=0.5,
                    topk_decay_steps=5000, g_lr_schedule="inverse_sqrt",
                    d_lr_schedule="inverse_sqrt", lr_hold_steps=10000),
    # Arjovsky et al. 2017: weight clipping, RMSprop (the paper's: clip 0.01, 5e-5, five critic
    # updates per cycle). Tuned for sample quality at equal wall clock on Fashion-MNIST
    # (benchmarks/results/quality.md, "The WGAN family" and "sngan and wgan recipes"): two critic
    # updates per cycle; the generator at four times the critic's rate (4e-4, critic 1e-4);
    # batch 32; the weights clipped to 0.05: at 0.01 the clipped critic is too weak to lead the
    # generator (10-minute FID 75.1 at 0.01, 50.3 at 0.02, 29.0 at 0.05, one core per row). Both
    # rates held for 5,000 cycles, then falling as 1 / sqrt(cycle): at constant rates FID rose
    # in the last 10 minutes of an hour on both seeds measured (20.4 -> 24.2, 24.8 -> 35.6; the
    # second run's row with the fall ended at 26.7: "Spectral norm with the gradient through
    # sigma, and wgan's rates decaying").
    "wgan": dict(loss="wasserstein", optimizer="rmsprop", g_lr=4e-4, d_lr=1e-4,
                   beta1=0.0, beta2=0.0, d_steps=2, clip_value=0.05, batch_size=32,
                   g_lr_schedule="inverse_sqrt", d_lr_schedule="inverse_sqrt",
                   lr_hold_steps=5000),
    # Gulrajani et al. 2017: a Wasserstein critic without batch norm, penalty 10, Adam betas
    # (0, 0.9) at 1e-4. Tuned for sample quality at equal wall clock on Fashion-MNIST
    # (benchmarks/results/quality.md, "The WGAN family"): one critic update per cycle, not five;
    # the penalty lazily, every 4 cycles (weight x 4); the generator at four times the critic's
    # rate (4e-4). Each change lowered the 5-minute FID (69.5 at 2 critic updates -> 24.2).
    "wgan_gp": dict(loss="wasserstein", optimizer="adam", g_lr=4e-4, d_lr=1e-4,
                      beta1=0.0, beta2=0.9, d_steps=1, penalty="gradient_penalty",
                      penalty_weight=10.0, penalty_every=4),
    # Mao et al. 2017: least-squares loss (a=0, b=c=1), Adam 2e-4, beta1 0.5.
    "lsgan": dict(loss="least_squares", optimizer="adam", g_lr=2e-4, d_lr=2e-4,
                    beta1=0.5, beta2=0.999, d_steps=1),
    # Miyato et al. 2018: spectral norm in D (no batch norm), Adam (0.5, 0.999), n_dis 1 -- their
    # best setting for the standard CNN. Tuned for sample quality at equal wall clock on
    # Fashion-MNIST (benchmarks/results/quality.md, "The WGAN family"): the non-saturating loss,
    # which the paper also trains, instead of the hinge; the generator at four times D's rate
    # (8e-4, D at the paper's 2e-4). 5-minute FID 137.0 -> 39.9.
    "sngan": dict(loss="non_saturating", optimizer="adam", g_lr=8e-4, d_lr=2e-4, beta1=0.5,
                    beta2=0.999, d_steps=1, d_spectral_norm=True),
    # Mescheder et al. 2018 / StyleGAN2: non-saturating loss, R1 on real data with gamma 10
    # (weight gamma/2 = 5), evaluated lazily every 16 cycles.
    "r1": dict(loss="non_saturating", optimizer="adam", g_lr=2e-4, d_lr=2e-4, beta1=0.5,
                 beta2=0.999, d_steps=1, penalty="r1", penalty_weight=5.0, penalty_every=16),
}

# Flags that change the convolutional image networks, refused on the toys' MLPs.
IMAGE_NETWORK_FLAGS = ("arch", "g_extra_blocks", "d_extra_blocks", "d_dropout", "g_upsample")
# The flag behind each family-specific builder keyword (`gan.architectures.Architecture`'s
# options) and the value that leaves it unused: an --arch whose builders lack the keyword
# refuses any other value.
GENERATOR_OPTION_FLAGS = {"extra_blocks": ("g_extra_blocks", 0),
                          "upsample": ("g_upsample", "transposed")}
DISCRIMINATOR_OPTION_FLAGS = {"normalization": ("d_normalization", "none"),
                              "dropout": ("d_dropout", 0.0), "extra_blocks": ("d_extra_blocks", 0)}
IMAGE_SUMMARY_SAMPLES, POINT_SUMMARY_SAMPLES = 64, 1000
# What `scoring.evaluate_generator` reports of images (the last four with a classifying
# evaluator), and `scoring.evaluate_toy_generator` of 2-D points; the HParams dashboard shows
# the first columns by default.
IMAGE_METRICS = ("fid", "kid", "precision", "recall", "kid_std", "inception_score",
                 "inception_score_std", "coverage", "class_kl")
TOY_METRICS = ("modes", "high_quality")
FIXED_NOISE_SALT = 7919


def is_points(info: DatasetInfo) -> bool:
    """Whether the dataset is one of the 2-D toys (points), not images."""
    return info.kind == "points"


def fixed_noise(config: Config, latent_shape: tuple[int, ...], count: int) -> tf.Tensor:
    """The noise batch of every progress image of a run (derived from --seed)."""
    import tensorflow as tf
    return tf.random.stateless_normal([count, *latent_shape], seed=[config.seed, FIXED_NOISE_SALT])


def generator_options(config: Config, keywords: tuple[str, ...]) -> dict[str, Any]:
    """The family-specific generator keywords (`Architecture.generator_options`) from flags."""
    return {keyword: getattr(config, GENERATOR_OPTION_FLAGS[keyword][0]) for keyword in keywords}


def discriminator_options(config: Config, keywords: tuple[str, ...]) -> dict[str, Any]:
    """The family-specific discriminator keywords (`Architecture.discriminator_options`)."""
    return {keyword: getattr(config, DISCRIMINATOR_OPTION_FLAGS[keyword][0]) for keyword in keywords}


def check_architecture_flags(config: Config) -> None:
    """Refuses a network flag that --arch's builders do not take, naming the archs that do."""
    from gan import architectures
    chosen = architectures.ARCHITECTURES[config.arch]
    for options, flags in (("generator_options", GENERATOR_OPTION_FLAGS),
                           ("discriminator_options", DISCRIMINATOR_OPTION_FLAGS)):
        for keyword, (flag, unused) in flags.items():
            value = getattr(config, flag)
            if keyword not in getattr(chosen, options) and value != unused:
                having = [name for name, arch in architectures.ARCHITECTURES.items()
                          if keyword in getattr(arch, options)]
                raise ConfigError(
                    f"--{flag}={value!r} is not an option of the --arch={config.arch} networks; "
                    f"drop it (default {unused!r}), or use --arch={' or '.join(having)}.")


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


def toy_selection(results: dict[str, Any], num_modes: int) -> float:
    """Lower is better: minus the sum of the fraction of modes captured and the fraction of
    high-quality samples.

    Both count equally: ranking by modes first would prefer an early, blurry generator whose
    few stray samples touch every mode (measured on grid25: 23 modes with 3.6% high-quality
    samples) over a sharp one that misses four (21 modes, 79%).
    """
    return -(results["modes"] / num_modes + results["high_quality"])


class UnconditionalGAN(Setup):
    """Generator/discriminator setups on images or 2-D points (see the module docstring)."""

    presets = PRESETS
    flag_owners = ("privacy",)
    metrics = IMAGE_METRICS + TOY_METRICS
    network_roles = ("generator", "discriminator")

    # -- data -------------------------------------------------------------------------------

    def check_data(self, config: Config, info: DatasetInfo, num_replicas: int = 1) -> None:
        from gan import augment, networks
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
        if is_points(info):
            for flag in IMAGE_NETWORK_FLAGS:
                if getattr(config, flag) != getattr(Config, flag):
                    raise ConfigError(
                        f"--{flag}={getattr(config, flag)!r} changes the convolutional image "
                        f"networks; dataset {config.dataset!r} has 2-D points, whose networks are "
                        "MLPs: drop it.")
            if config.diffaugment:
                raise ConfigError(f"--diffaugment={config.diffaugment!r} augments images; dataset "
                                  f"{config.dataset!r} has 2-D points: leave it empty.")
            if config.consistency_weight:
                raise ConfigError(
                    f"--consistency_weight={config.consistency_weight!r} compares the "
                    f"discriminator on augmented images; dataset {config.dataset!r} has 2-D "
                    "points: use 0.")
            return
        height, width, _ = info.shape
        if height != width or height not in networks.SUPPORTED_RESOLUTIONS:
            raise ConfigError(
                f"--resolution={height} (dataset {config.dataset!r} gives {height}x{width}) is not "
                f"supported by the image networks; use --resolution with one of "
                f"{', '.join(map(str, networks.SUPPORTED_RESOLUTIONS))}.")
        check_architecture_flags(config)
        if config.jit_compile and num_replicas > 1:
            raise ConfigError(
                f"--jit_compile with {num_replicas} replicas: the generator's "
                "synchronized batch norm all-reduces inside the forward pass, which XLA cannot "
                "compile; use one replica or --jit_compile=false.")

    # -- building ---------------------------------------------------------------------------

    def conditioning(self, config: Config, info: DatasetInfo) -> Conditioning:
        """How labels enter the networks and losses: not at all here."""
        from trainers.setups.adversarial import Conditioning
        return Conditioning()

    def user_network(self, config: Config, info: DatasetInfo, role: str) -> keras.Model:
        """`--generator`/`--discriminator`: the user's network for `role` (`user_networks`)."""
        from trainers.setups import user_networks
        conditioning = self.conditioning(config, info)
        return user_networks.build(config, role, shape=info.shape,
                                   num_classes=conditioning.num_classes,
                                   classifier=conditioning.classifier)

    def generator(self, config: Config, info: DatasetInfo, name: str) -> keras.Model:
        if config.generator:
            return self.user_network(config, info, "generator")
        from gan import architectures, networks
        if is_points(info):
            return networks.mlp_generator(latent_dim=config.latent_dim, output_dim=info.shape[0],
                                          name=name)
        resolution, _, channels = info.shape
        arch = architectures.ARCHITECTURES[config.arch]
        return arch.generator(resolution=resolution, channels=channels,
                              latent_dim=config.latent_dim, width=config.g_width, name=name,
                              **generator_options(config, arch.generator_options))

    def discriminator(self, config: Config, info: DatasetInfo) -> keras.Model:
        if config.discriminator:
            return self.user_network(config, info, "discriminator")
        from gan import architectures, networks
        if is_points(info):
            return networks.mlp_discriminator(input_dim=info.shape[0], pack=config.pack)
        resolution, _, channels = info.shape
        arch = architectures.ARCHITECTURES[config.arch]
        return arch.discriminator(
            resolution=resolution, channels=channels, width=config.d_width,
            spectral_norm=config.d_spectral_norm, pack=config.pack,
            **discriminator_options(config, arch.discriminator_options))

    def build(self, config: Config, info: DatasetInfo, strategy: tf.distribute.Strategy) -> Built:
        import tensorflow as tf

        from trainers.setups import adversarial, building
        self.check_data(config, info)
        conditioning = self.conditioning(config, info)
        use_ema = config.ema_halflife_kimg > 0
        weights = {"penalty": tf.Variable(float(config.penalty_weight), trainable=False,
                                          name="penalty_weight")}
        if conditioning.classifier:
            weights["aux"] = tf.Variable(float(config.aux_weight), trainable=False, name="aux_weight")
        phases = adversarial.adversarial_phases(
            config, config.latent_dim, conditioning=conditioning, penalty_weight=weights["penalty"],
            aux_weight=weights.get("aux"),
            generator_after_update=building.ema_updater(config) if use_ema else None)
        with strategy.scope(), building.dtype_policy(config):
            models = {"generator": self.generator(config, info, "generator"),
                      "discriminator": self.discriminator(config, info)}
            if use_ema:
                models["generator_ema"] = self.generator(config, info, "generator_ema")
                models["generator_ema"].set_weights(models["generator"].get_weights())
            optimizers, scales, progress = building.build_optimizers(config, phases, models)
        if config.dp_l2_clip:
            refuse_mixing_layers(models["discriminator"])
        sampler = "generator_ema" if use_ema and config.use_ema else "generator"
        return Built(models=models, optimizers=optimizers, phases=phases,
                     learning_rate_scales=scales, train_time_progress=progress, loss_weights=weights,
                     latent_shape=(config.latent_dim,),
                     sample=conditioning.sampler(models[sampler]), sampler=sampler)

    # -- training outputs -------------------------------------------------------------------

    def summaries(self, config: Config, built: Built, info: DatasetInfo) -> list[PeriodicAction]:
        from trainers.outputs import actions
        if is_points(info):
            count, write = POINT_SUMMARY_SAMPLES, actions.scatter_writer("samples", modes=info.modes)
        else:
            count, write = IMAGE_SUMMARY_SAMPLES, actions.image_grid_writer("samples")
        return [actions.sample_summaries(
            every=config.image_every, sample=built.sample, write=write,
            noise=fixed_noise(config, built.latent_shape, count))]

    def scorer(self, config: Config, built: Built, info: DatasetInfo) -> Scorer:
        if is_points(info):
            from gan import scoring
            return Scorer(
                score=lambda: scoring.evaluate_toy_generator(
                    built.sample, latent_shape=built.latent_shape, modes=info.modes,
                    std=info.mode_std, seed=config.seed),
                selection=lambda results: toy_selection(results, len(info.modes)))
        evaluator = self.image_evaluator(config, config, info)
        return Scorer(score=lambda: self.score_images(evaluator, config, built, info),
                      selection=lambda results: results["fid"])

    def image_evaluator(self, config: Config, run: Config, info: DatasetInfo):
        """The evaluator of `run`'s test split; for a conditional run it refuses, before any
        training, an --eval_samples too small for the per-class metrics."""
        from trainers.evaluation.scorers import ImageEvaluator
        evaluator = ImageEvaluator(config, run)
        num_classes = self.conditioning(run, info).num_classes
        if num_classes:
            evaluator.check_class_counts(num_classes)
        return evaluator

    def score_images(self, evaluator, run: Config, built: Built, info: DatasetInfo) -> dict[str, Any]:
        """The image metrics of `built`'s sampler; class-balanced with the class metrics when
        the run is conditional."""
        conditioning = self.conditioning(run, info)
        return evaluator(built.sample, built.latent_shape, num_classes=conditioning.num_classes,
                         sample_labeled=conditioning.labeled_sampler(built.models[built.sampler]))

    # -- sample, eval, export -----------------------------------------------------------------

    def sample(self, config: Config, restored: Restored) -> int:
        from trainers.outputs import images
        from trainers.setups import draws
        if is_points(restored.info) and (config.grid or config.interpolate):
            flag = f"--grid={config.grid!r}" if config.grid else f"--interpolate={config.interpolate}"
            raise ConfigError(
                f"{flag} lays out images, but {config.logdir!r} is a 2-D toy run "
                f"({restored.info.name}) whose samples are points drawn as one scatter plot; use "
                "--num_samples instead.")
        built, info = restored.built, restored.info
        conditioning = self.conditioning(restored.run, info)
        label = draws.requested_label(config, run=restored.run, num_classes=conditioning.num_classes,
                                      class_names=info.class_names)
        draw = draws.plan_draw(config, latent_shape=built.latent_shape,
                               num_classes=conditioning.num_classes, label=label)
        if draw.labels is None:
            outputs = built.sample(draw.noise).numpy()
        else:
            outputs = conditioning.labeled_sampler(built.models[built.sampler])(
                draw.noise, draw.labels).numpy()
        if is_points(restored.info):
            images.save_points(outputs, config.output, modes=restored.info.modes)
        else:
            images.save_samples(outputs, config.output, rows=draw.rows)
        return len(outputs)

    def evaluate(self, config: Config, run: Config, restored: Restored | None) -> dict[str, Any]:
        from gan import scoring
        info = self.dataset_info(run)
        if is_points(info):
            if restored is None:
                raise ConfigError("--real_vs_real compares image splits; toy datasets have none.")
            results = self.scorer(config, restored.built, info).score()
            return {**results, "num_samples": scoring.TOY_SAMPLES}
        evaluator = self.image_evaluator(config, run, info)
        if restored is None:
            results = evaluator.real_vs_real(self.conditioning(run, info).num_classes)
        else:
            results = self.score_images(evaluator, run, restored.built, info)
        return {**results, "num_samples": config.eval_samples}

    def export_archive(self, config: Config, restored: Restored) -> Export:
        from trainers.setups import draws
        built, info = restored.built, restored.info
        num_classes = self.conditioning(restored.run, info).num_classes
        archive = build_archive(built.models[built.sampler], kind=info.kind,
                                latent_dim=built.latent_shape[0], num_classes=num_classes)
        metadata = {
            "kind": info.kind, "latent_dim": built.latent_shape[0], "output_shape": list(info.shape),
            "signatures": {"serving_default": ["noise"], "seed": ["seed", "count"]},
            "noise": "tf.random.stateless_normal([count, latent_dim], "
                     f"seed=[seed, {draws.SAMPLE_NOISE_SALT}])"}
        if num_classes:
            metadata.update(num_classes=num_classes,
                            class_names=list(info.class_names) if info.class_names else None,
                            signatures={"serving_default": ["noise", "labels"],
                                        "seed": ["seed", "count", "label"]})
        return Export(archive=archive, model=built.sampler, metadata=metadata)


def uint8_images(images: tf.Tensor) -> tf.Tensor:
    """[-1, 1] float pixels -> uint8, in graph ops: floor((x + 1) * 127.5 + 0.5), clipped.

    The same mapping as `images.to_uint8`, computed in float32 rather than float64, so a pixel
    within ~1e-5 of a rounding boundary may land one level apart.
    """
    import tensorflow as tf
    scaled = (tf.clip_by_value(tf.cast(images, tf.float32), -1.0, 1.0) + 1.0) * 127.5 + 0.5
    return tf.cast(tf.floor(scaled), tf.uint8)


def build_archive(generator: keras.Model, *, kind: str, latent_dim: int,
                  num_classes: int = 0) -> keras.export.ExportArchive:
    """The generator with two endpoints: `serving_default` (`noise` float32 [N, latent_dim] ->
    `images` uint8 [N, H, W, C] for kind "image", `points` float32 [N, 2] for "points") and
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
    if kind not in ("image", "points") or num_classes < 0:
        raise ValueError(f"build_archive needs kind 'image' or 'points' and num_classes >= 0, "
                         f"got {kind!r} and {num_classes!r}.")

    def outputs(generated):
        if kind == "image":
            return {"images": uint8_images(generated)}
        return {"points": tf.cast(generated, tf.float32)}

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
