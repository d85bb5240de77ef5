"""`--setup=cyclegan`: unpaired image-to-image translation (Zhu et al. 2017).

Models: generators G = "generator_ab" (A -> B) and F = "generator_ba" (B -> A), discriminators
D_A = "discriminator_a" and D_B = "discriminator_b" (`gan.cyclegan`), each with its own Adam
optimizer of the same name, and the two histories of generated images D_A and D_B are shown
("history_a", "history_b"; their buffers are checkpointed like weights).

One cycle is two phases, each drawing its own batch of unpaired examples {"a", "b"}:
  discriminators  D_A and D_B, loss = D_A's + D_B's adversarial loss on real images against
                  translations passed through the history. Their sum is exact for both: they
                  share no variables, so each gets the gradient of its own loss.
  generators      G and F jointly: adversarial (both ways) + --cycle_weight x L1(x, F(G(x))) and
                  L1(y, G(F(y))) + --identity_weight x L1(y, G(y)) and L1(x, F(x)) (0: off).
The adversarial loss is `--loss` (least squares in the preset). `gan.losses` writes the
least-squares generator loss as Mao et al.'s 0.5 (D - 1)^2; CycleGAN's objective, to which
its weights 10 and 5 are relative, has (D - 1)^2, so that term is doubled here. Its
discriminator loss, 0.5 ((D(y) - 1)^2 + D(G(x))^2), is already the paper's "divide by 2".

The history exchange runs on the global batch: every replica gathers all translations and
draws the same stateless numbers from the update's seed, so all replicas agree on the buffer
and the run does not depend on the replica count. The data, the test images, `--mode=sample`
and `--mode=eval` of a CycleGAN run also live here; `--mode=export` refuses it for now.

TensorFlow, NumPy and `gan/` are imported inside the functions that use them (see `protocol`).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Callable, Mapping

from trainers.config.flags import Config, ConfigError, Flag, declare
from trainers.evaluation.tags import IMAGE_METRICS
from trainers.setups import inference
from trainers.setups.protocol import Built, LearningRate, Parts, Restored, Setup

if TYPE_CHECKING:
    import numpy as np
    import tensorflow as tf

    from datasets import domains
    from datasets.registry import DatasetInfo
    from gan import cyclegan
    from trainers.engine.controller import PeriodicAction
    from trainers.engine.phases import Phase, StepInputs

PRESETS = {
    # Zhu et al. 2017: least-squares loss, Adam 2e-4 beta1 0.5, cycle weight 10, identity 5.
    "cyclegan": dict(loss="least_squares", optimizer="adam", g_lr=2e-4, d_lr=2e-4, beta1=0.5,
                       beta2=0.999, d_updates=1),
}
GENERATORS = {"ab": "generator_ab", "ba": "generator_ba"}
DISCRIMINATORS = {"a": "discriminator_a", "b": "discriminator_b"}
HISTORIES = {"a": "history_a", "b": "history_b"}
HISTORY_SALTS = {"a": 0, "b": 1}
# The paper's generator adversarial term over `gan.losses`' form (see the module docstring).
PAPER_GENERATOR_SCALE = {"least_squares": 2.0}
SUMMARY_IMAGES = 8


@dataclasses.dataclass(frozen=True)
class Direction:
    """One way of translating: source and target domain sides, and the two generators."""

    source: str
    target: str
    forward: str
    backward: str


DIRECTIONS = {"ab": Direction("a", "b", GENERATORS["ab"], GENERATORS["ba"]),
              "ba": Direction("b", "a", GENERATORS["ba"], GENERATORS["ab"])}

declare(
    "cyclegan",
    Flag('domain_a', str, '',
         help='cyclegan: domain A as DATASET[:CLASS[,CLASS...]] (e.g. fashion_mnist:Sneaker) or a '
              'TFDS cycle_gan domain (e.g. tfds:cycle_gan/horse2zebra:A, splits trainA/testA; needs'
              ' --resolution).',
         fixed_on_resume=True),
    Flag('domain_b', str, '',
         help='cyclegan: domain B, same form as --domain_a.',
         fixed_on_resume=True),
    Flag('cycle_weight', float, 10.0,
         help='cyclegan: weight of the cycle-consistency (L1) losses.'),
    Flag('identity_weight', float, 5.0,
         help='cyclegan: weight of the identity (L1) losses (paper: half the cycle weight; 0: off).'),
    Flag('direction', str, 'ab',
         help='cyclegan --mode=sample: translate test images of domain A to B (ab) or of B to A '
              '(ba).',
         choices=tuple(DIRECTIONS), hparam=False),
)


def parse_domains(config: Config) -> dict[str, domains.Domain]:
    """{"a": domain A, "b": domain B} from --domain_a/--domain_b at --resolution and
    --channels."""
    from datasets import domains
    return {side: domains.parse_domain(getattr(config, f"domain_{side}"), flag=f"domain_{side}",
                                       resolution=config.resolution, channels=config.channels)
            for side in ("a", "b")}


def _load_options(config: Config, run: Config) -> dict:
    """`domains.load_domain` keywords: data locations from `config`, the size from `run`."""
    return {"data_dir": config.data_dir, "fashion_mnist_dir": config.fashion_mnist_dir,
            "resolution": run.resolution, "seed": run.seed, "channels": run.channels}


def domain_images(config: Config, run: Config, side: str, count: int,
                  split: str | None = None) -> np.ndarray:
    """The first `count` images of `split` (default: the test split) of domain `side` ("a" or
    "b") of `run` (fewer when the split holds fewer), float32 [N, H, W, C] in [-1, 1]."""
    import numpy as np

    from datasets import domains
    split = split or domains.TEST_SPLIT
    domain = parse_domains(run)[side]
    examples = domains.load_domain(domain, split=split, **_load_options(config, run))
    batches = [batch["x"] for batch in examples.take(count).batch(500).as_numpy_iterator()]
    if not batches:
        raise ConfigError(f"--domain_{side}={domain.spec!r} has no {split} images.")
    return np.concatenate(batches)


def _patch_scores(logits: tf.Tensor) -> tf.Tensor:
    """Per-example mean of a PatchGAN logit map: (batch,)."""
    import tensorflow as tf
    return tf.reduce_mean(tf.reshape(tf.cast(logits, tf.float32), (tf.shape(logits)[0], -1)), axis=1)


def _through_history(history: cyclegan.ImageHistory, fakes: tf.Tensor, inputs: StepInputs,
                     salt: int) -> tf.Tensor:
    """This replica's rows of the global batch of `fakes` after the history exchange."""
    import tensorflow as tf
    context = tf.distribute.get_replica_context()
    if context.num_replicas_in_sync > 1:
        # all_gather loses the static batch size, which the exchange loop needs.
        fakes = tf.reshape(context.all_gather(fakes, axis=0),
                           [inputs.global_batch_size, *fakes.shape[1:]])
    draws = tf.random.stateless_uniform(
        [inputs.global_batch_size, 2], seed=tf.random.experimental.stateless_fold_in(inputs.seed, salt))
    shown = history.exchange(fakes, draws)
    start = inputs.replica_index * inputs.replica_batch_size
    return shown[start:start + inputs.replica_batch_size]


def cyclegan_phases(config: Config) -> tuple[Phase, Phase]:
    """The two phases of one cycle (see the module docstring)."""
    from gan import cyclegan, losses
    from trainers.engine.phases import LossOutput, Phase
    adversarial = losses.get_loss(config.loss)
    generator_scale = PAPER_GENERATOR_SCALE.get(config.loss, 1.0)
    use_identity = config.identity_weight > 0

    def discriminators_loss(models, inputs: StepInputs) -> LossOutput:
        real = inputs.real
        fakes = {"b": models[GENERATORS["ab"]](real["a"], training=True),
                 "a": models[GENERATORS["ba"]](real["b"], training=True)}
        total, metrics = 0.0, {}
        for side in ("a", "b"):
            discriminator = models[DISCRIMINATORS[side]]
            shown = _through_history(models[HISTORIES[side]], fakes[side], inputs, HISTORY_SALTS[side])
            real_logits = discriminator(real[side], training=True)
            fake_logits = discriminator(shown, training=True)
            loss = inputs.mean(adversarial.discriminator(real_logits, fake_logits))
            metrics.update({f"adversarial_{side}": loss,
                            f"real_score_{side}": inputs.mean(_patch_scores(real_logits)),
                            f"fake_score_{side}": inputs.mean(_patch_scores(fake_logits))})
            total += loss
        return LossOutput(loss=total, metrics=metrics)

    def generators_loss(models, inputs: StepInputs) -> LossOutput:
        real = inputs.real
        forward, backward = models[GENERATORS["ab"]], models[GENERATORS["ba"]]
        fake_b, fake_a = forward(real["a"], training=True), backward(real["b"], training=True)
        l1 = lambda target, output: inputs.mean(cyclegan.reconstruction_loss(target, output))  # noqa: E731
        metrics = {
            "adversarial_ab": inputs.mean(adversarial.generator(
                models[DISCRIMINATORS["b"]](fake_b, training=True))),
            "adversarial_ba": inputs.mean(adversarial.generator(
                models[DISCRIMINATORS["a"]](fake_a, training=True))),
            "cycle_a": l1(real["a"], backward(fake_b, training=True)),
            "cycle_b": l1(real["b"], forward(fake_a, training=True)),
        }
        total = (generator_scale * (metrics["adversarial_ab"] + metrics["adversarial_ba"])
                 + config.cycle_weight * (metrics["cycle_a"] + metrics["cycle_b"]))
        if use_identity:
            metrics["identity_a"] = l1(real["a"], backward(real["a"], training=True))
            metrics["identity_b"] = l1(real["b"], forward(real["b"], training=True))
            total += config.identity_weight * (metrics["identity_a"] + metrics["identity_b"])
        return LossOutput(loss=total, metrics=metrics)

    d_models = tuple(DISCRIMINATORS.values())
    g_models = tuple(GENERATORS.values())
    return (
        Phase(name="discriminators", models=d_models, optimizers=d_models, loss=discriminators_loss,
              metrics=tuple(f"{kind}_{side}" for side in ("a", "b")
                            for kind in ("adversarial", "real_score", "fake_score")),
              repeats=config.d_updates, clip_norm=config.d_clip_global_norm),
        Phase(name="generators", models=g_models, optimizers=g_models, loss=generators_loss,
              metrics=("adversarial_ab", "adversarial_ba", "cycle_a", "cycle_b")
              + (("identity_a", "identity_b") if use_identity else ()),
              repeats=config.g_updates, clip_norm=config.g_clip_global_norm),
    )


def translation_chains(models: Mapping, inputs: Mapping[str, np.ndarray]) -> dict:
    """`actions.translation_summaries` chains of the fixed `inputs` {"a", "b"}:
    "translation_ab" shows A, G(A), F(G(A)) and "translation_ba" B, F(B), G(F(B))."""
    import tensorflow as tf
    return {f"translation_{key}": (tf.constant(inputs[way.source]),
                                   (models[way.forward], models[way.backward]))
            for key, way in DIRECTIONS.items()}


class CycleGAN(Setup):
    """Unpaired translation between --domain_a and --domain_b (see the module docstring)."""

    presets = PRESETS
    # Its generators' and discriminators' rates, updates and widths, the adversarial loss and
    # the evaluator's features; not the --arch networks, the GAN game's regularizers or an EMA.
    flag_owners = ("cyclegan", "generator", "discriminator", "features")
    metrics = tuple(f"{way}/{name}" for way in DIRECTIONS for name in IMAGE_METRICS)

    def check_flags(self, config: Config) -> None:
        if config.mode != "train":
            return
        for flag in ("domain_a", "domain_b"):
            if not getattr(config, flag):
                raise ConfigError(
                    f"--{flag}='' is invalid: --setup=cyclegan translates between two image domains; "
                    "give both, e.g. --domain_a=fashion_mnist:Sneaker "
                    "--domain_b='fashion_mnist:Ankle boot'.")
        if config.dataset != Config.dataset:
            raise ConfigError(f"--dataset={config.dataset!r} is invalid: --setup=cyclegan reads its "
                              "data from --domain_a and --domain_b; drop --dataset.")
        if config.loss == "wasserstein":
            raise ConfigError(
                f"--loss={config.loss!r} is invalid: a Wasserstein critic needs a Lipschitz "
                "constraint, which --setup=cyclegan does not have; use least_squares (the paper's), "
                "non_saturating or hinge.")
        if config.eval_every:
            raise ConfigError(f"--eval_every={config.eval_every!r} is invalid: --setup=cyclegan is "
                              "evaluated after training, with --mode=eval; drop it.")

    def dataset_info(self, config: Config) -> DatasetInfo:
        """Both domains' common image shape."""
        from datasets import domains
        parsed = parse_domains(config)
        return domains.pair_info(parsed["a"], parsed["b"])

    def training_sets(self, config: Config, info: DatasetInfo) -> dict[str, int | None]:
        """Both domains: a batch takes --batch_size images of each."""
        return {f"--domain_{side}={domain.spec!r}": domain.num_examples
                for side, domain in parse_domains(config).items()}

    def training_examples(self, config: Config) -> Callable[[], dict[str, tf.data.Dataset]]:
        """``fn() -> {"a": images, "b": images}``: the finite training images of each domain,
        which `pipeline.training_input_fn` shuffles on their own and zips into unpaired
        examples."""
        from datasets import domains
        return domains.training_images(parse_domains(config), **_load_options(config, config))

    def learning_rates(self, config: Config) -> Mapping[str, LearningRate]:
        from trainers.setups import building
        return building.adversarial_rates(config, GENERATORS.values(), DISCRIMINATORS.values())

    def build(self, config: Config, info: DatasetInfo) -> Parts:
        from gan import cyclegan
        resolution, _, channels = info.shape
        phases = cyclegan_phases(config)
        models = {name: cyclegan.resnet_generator(resolution=resolution, channels=channels,
                                                  width=config.g_width, name=name)
                  for name in GENERATORS.values()}
        models.update({name: cyclegan.patch_discriminator(
            resolution=resolution, channels=channels, width=config.d_width, name=name)
            for name in DISCRIMINATORS.values()})
        models.update({name: cyclegan.ImageHistory(image_shape=info.shape, name=name)
                       for name in HISTORIES.values()})
        return Parts(models=models, phases=phases)

    def summaries(self, config: Config, built: Built, info: DatasetInfo) -> list[PeriodicAction]:
        """Every --image_every cycles, the translation grids of the first SUMMARY_IMAGES test
        images of each domain (the same all run long, so progress is visible)."""
        from trainers.outputs import actions
        inputs = {side: domain_images(config, config, side, SUMMARY_IMAGES) for side in ("a", "b")}
        return [actions.translation_summaries(every=config.image_every,
                                              chains=translation_chains(built.models, inputs))]

    def sample(self, config: Config, restored: Restored) -> int:
        """Translates the first `--num_samples` test images of the `--direction`'s source domain
        (A for ab, B for ba). A .npy output holds the translations (uint8 NHWC); a .png shows
        three rows, each column one image: the inputs, their translations and the translations
        back (G(A), then F(G(A)) for ab)."""
        import numpy as np

        from trainers.outputs import images
        for flag in ("grid", "interpolate", "truncation", "label"):
            value = getattr(config, flag)
            if value:
                raise ConfigError(
                    f"--{flag}={value!r} shapes samples drawn from noise, but the run in "
                    f"{config.logdir!r} is a CycleGAN, which translates test images; drop it and "
                    "use --num_samples and --direction.")
        way = DIRECTIONS[config.direction]
        models = restored.built.models
        sources = domain_images(config, restored.run, way.source, config.num_samples)
        translated = inference.predict(models[way.forward], sources)
        if config.output.endswith(".npy"):
            images.save_samples(translated, config.output)
        else:
            cycled = inference.predict(models[way.backward], translated)
            images.save_samples(np.concatenate([sources, translated, cycled]), config.output, rows=3)
        return len(translated)

    def evaluate(self, config: Config, run: Config, restored: Restored | None) -> dict[str, Any]:
        """Per direction, the image metrics of the translated test images of the source domain
        against the test images of the target domain ("ab": G(A) against B, "ba": F(B) against
        A), with the `--evaluator` features of the target's dataset (keys naming them,
        `tags.name_features`). Each side has
        n = min(--eval_samples, the two test splits' sizes) images. With `--real_vs_real` the
        target's first n training images stand in for the translations: the floor."""
        import tensorflow as tf

        from datasets import domains
        from gan import evaluation
        from trainers.evaluation import tags
        from trainers.evaluation.image_evaluation import feature_extractor
        parsed = parse_domains(run)
        extractors = {}
        results: dict[str, Any] = {}
        for key, way in DIRECTIONS.items():
            real = domain_images(config, run, way.target, config.eval_samples)
            if restored is None:
                generated = domain_images(config, run, way.target, len(real), split=domains.TRAIN_SPLIT)
            else:
                sources = domain_images(config, run, way.source, len(real))
                generated = inference.predict(restored.built.models[way.forward], sources)
            count = min(len(real), len(generated))
            dataset = parsed[way.target].dataset
            if dataset not in extractors:
                extractors[dataset] = feature_extractor(config, dataset, run.resolution,
                                                        run.channels)
            metrics = evaluation.evaluate_images(
                tf.data.Dataset.from_tensor_slices(real[:count]),
                evaluation.replay_sampler(generated[:count]), latent_shape=(1,),
                extractor=extractors[dataset], num_samples=count, seed=config.seed)
            results[key] = {**tags.name_features(metrics, extractors[dataset].name),
                            "num_samples": count, "features": extractors[dataset].record()}
        return results

    def export_archive(self, config: Config, restored: Restored):
        raise ConfigError(f"--mode=export of {config.logdir!r}: CycleGAN runs (image-to-image "
                          "generators) cannot be exported yet; use --mode=sample to translate.")
