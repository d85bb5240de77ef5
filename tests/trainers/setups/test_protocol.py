"""The Setup protocol, proved by a setup that exists only in this file.

`TwoGenerators` (a mixture of two generators against one discriminator, on the ring8 toy) is
registered here and nowhere else, with two flags and a preset of its own; it is trained (and
resumed), sampled, evaluated and exported through the entry points `run.py` calls, so no project
file needs to know a setup's name or its flags. It is an `AdversarialSetup`: its networks come
from the role hooks, so a user's `--discriminator` fills its discriminator.
"""

import dataclasses
import json
import os
import subprocess
import sys

import numpy as np
import keras
import pytest
import tensorflow as tf

from gan import evaluation, losses, networks
from trainers import api
from trainers.config.flags import Config, ConfigError, Flag, declare, declared
from trainers.engine.phases import LossOutput, Phase
from trainers.modes import evaluate, export, restore, sample, train
from trainers.outputs import actions, images
from trainers.setups import building, registry, user_networks
from trainers.setups.adversarial_setup import AdversarialSetup
from trainers.setups.protocol import Export, Parts, PeriodicEvaluation, Sampling
from trainers.setups.gans import build_archive

NAME = "two_generators"
GENERATORS = ("generator_a", "generator_b")
declare(
    NAME,
    Flag("mixture_width", int, 16, help="two_generators: width of each MLP.",
         fixed_on_resume=True),
    Flag("mixture_loss_weight", float, 1.0, help="two_generators: weight of the generators' loss."),
)


class TwoGenerators(AdversarialSetup):
    """Each generator makes half of every fake batch; the discriminator sees both halves."""

    presets = {NAME: dict(loss="non_saturating", optimizer="adam", g_lr=1e-3, d_lr=1e-3,
                          beta1=0.5, beta2=0.999, d_updates=2, batch_size=16)}
    flag_owners = (NAME, "generator", "discriminator", "architecture")
    # Its generators are not one "generator" model: a user network fills only the discriminator.
    network_roles = ("discriminator",)
    generator_optimizers = GENERATORS

    def check_data(self, config, info, num_replicas=1):
        if info.kind != "toy":
            raise ConfigError(f"--setup={NAME} trains on a toy's 2-D points; use --dataset=ring8.")

    def builtin_generator(self, config, info, name):
        return networks.mlp_generator(latent_dim=config.latent_dim, width=config.mixture_width,
                                      name=name)

    def builtin_discriminator(self, config, info):
        return networks.mlp_discriminator(width=config.mixture_width)

    def build(self, config, info):
        loss = losses.get_loss(config.loss)

        def fakes(models, inputs):
            noise = inputs.normal([config.latent_dim], salt=0)
            half = inputs.replica_batch_size // 2
            return tf.concat([models[GENERATORS[0]](noise[:half], training=True),
                              models[GENERATORS[1]](noise[half:], training=True)], axis=0)

        def discriminator_loss(models, inputs):
            real_logits = models["discriminator"](inputs.real["x"], training=True)
            fake_logits = models["discriminator"](fakes(models, inputs), training=True)
            return LossOutput(loss=inputs.mean(loss.discriminator(real_logits, fake_logits)))

        def generators_loss(models, inputs):
            logits = models["discriminator"](fakes(models, inputs), training=True)
            return LossOutput(loss=config.mixture_loss_weight * inputs.mean(loss.generator(logits)))

        phases = (Phase(name="discriminator", models=("discriminator",), loss=discriminator_loss,
                        repeats=config.d_updates),
                  Phase(name="generators", models=GENERATORS, optimizers=GENERATORS,
                        loss=generators_loss, uses_data=False))
        models = {name: self.generator(config, info, name) for name in GENERATORS}
        models["discriminator"] = self.discriminator(config, info)

        def sample_both(noise):
            half = tf.shape(noise)[0] // 2
            return tf.concat([models[GENERATORS[0]](noise[:half], training=False),
                              models[GENERATORS[1]](noise[half:], training=False)], axis=0)

        return Parts(models=models, phases=phases, sampling=Sampling(
            latent_shape=(config.latent_dim,), sample=sample_both, model=GENERATORS[0]))

    def summaries(self, config, built, info):
        return [actions.sample_summaries(
            every=config.image_every, sample=built.sampling.sample,
            noise=tf.zeros([8, config.latent_dim]),
            write=actions.scatter_writer("samples", modes=info.modes))]

    def periodic_evaluation(self, config, built, info):
        return PeriodicEvaluation(evaluate=lambda: evaluation.evaluate_toy_generator(
            built.sampling.sample, latent_shape=built.sampling.latent_shape, modes=info.modes,
            std=info.mode_std, seed=config.seed), selection=lambda results: -results["modes"])

    def sample(self, config, restored):
        sampling = restored.built.sampling
        noise = tf.random.stateless_normal([config.num_samples, *sampling.latent_shape],
                                           seed=[config.seed, 0])
        points = sampling.sample(noise).numpy()
        images.save_points(points, config.output, modes=restored.info.modes)
        return len(points)

    def evaluate(self, config, run, restored):
        if restored is None:
            raise ConfigError("--real_vs_real: the toys have no splits.")
        return self.periodic_evaluation(config, restored.built, restored.info).evaluate()

    def export_archive(self, config, restored):
        archive = build_archive(restored.built.models[GENERATORS[0]], kind="toy",
                                latent_dim=restored.built.sampling.latent_shape[0])
        return Export(archive=archive, model=GENERATORS[0], metadata={"setup": NAME})


@pytest.fixture
def two_generators():
    with registry.registered(TwoGenerators()) as setup:
        yield setup


def _config(logdir, **overrides):
    """The config run.py makes of these flags (`api.run_config`)."""
    return api.run_config({"setup": NAME, "dataset": "ring8", "latent_dim": 4, "train_cycles": 12,
                           "cycles_per_loop": 4, "checkpoint_every": 4, "image_every": 4,
                           "histogram_every": 0, "eval_every": 8, "logdir": str(logdir),
                           "seed": 5, "mixture_width": 8, **overrides})


def test_a_setup_defined_in_a_test_trains_resumes_samples_evaluates_and_exports(
        two_generators, tmp_path):
    logdir = tmp_path / "run"
    first = train.train(_config(logdir, train_cycles=8, mixture_loss_weight=0.5),
                        progress_stream=open(os.devnull, "w"))
    assert first.step == 8
    assert first.trainer.state.models["generator_a"].count_params() == \
        networks.mlp_generator(latent_dim=4, width=8).count_params()
    # Its flag fixed on resume is refused changed; the other may change.
    with pytest.raises(ConfigError, match=r"--mixture_width=16 \(was 8\)"):
        train.train(_config(logdir, mixture_width=16), progress_stream=open(os.devnull, "w"))
    resumed = train.train(_config(logdir), progress_stream=open(os.devnull, "w"))
    assert resumed.step == 12
    # Phases as the setup declared them: D twice per cycle, both generators once.
    assert int(resumed.trainer.state.optimizers["discriminator"].iterations) == 24
    assert [int(resumed.trainer.state.optimizers[g].iterations) for g in GENERATORS] == [12, 12]
    recorded = json.loads((logdir / "config.json").read_text())
    assert (recorded["setup"], recorded["mixture_width"], recorded["mixture_loss_weight"]) == \
        (NAME, 8, 0.5)
    best = json.loads((logdir / "checkpoints_best" / "best.json").read_text())
    assert best["step"] == 8 and set(best) >= {"modes", "high_quality", "score"}

    query = Config(mode="sample", logdir=str(logdir), num_samples=10,
                   output=str(tmp_path / "points.npy"), seed=2)
    sampled = sample.sample(query)
    points = np.load(tmp_path / "points.npy")
    assert sampled.count == 10 and points.shape == (10, 2)
    restored = restore.restore(str(logdir), use_ema=False)
    assert restored.step == 12
    noise = tf.random.stateless_normal([10, 4], seed=[2, 0])
    np.testing.assert_allclose(points, restored.built.sampling.sample(noise).numpy(), rtol=1e-6)

    metrics = evaluate.evaluate(dataclasses.replace(query, mode="eval"))
    assert metrics["step"] == 12 and metrics["generator"] == GENERATORS[0]
    again = TwoGenerators().periodic_evaluation(query, restored.built, restored.info).evaluate()
    assert (metrics["modes"], metrics["high_quality"]) == (again["modes"], again["high_quality"])

    exported = export.export(dataclasses.replace(query, mode="export"))
    assert exported.generator == GENERATORS[0] and exported.step == 12
    loaded = tf.saved_model.load(exported.path)
    served = loaded.signatures["serving_default"](noise=noise[:5])["points"].numpy()
    # Export rebuilds the run in float32 (it trained at --precision=auto's choice).
    rebuilt = restore.restore(str(logdir), use_ema=False, precision="float32")
    np.testing.assert_allclose(served, rebuilt.built.models[GENERATORS[0]](noise[:5]).numpy(),
                               rtol=1e-5, atol=1e-6)
    assert json.loads(open(os.path.join(exported.path, "export.json")).read())["setup"] == NAME


def user_discriminator(latent_dim, shape, num_classes, classifier):
    """A user's --discriminator for the 2-D points: one layer of its own name."""
    inputs = keras.Input(shape)
    return keras.Model(inputs, keras.layers.Dense(1, name="users_own")(inputs))


def test_a_user_network_fills_the_discriminator_role_and_no_other(two_generators, tmp_path):
    config = _config(tmp_path / "run", discriminator=f"{__name__}:user_discriminator", g_lr=2e-3)
    with user_networks.supplied({"discriminator": user_discriminator}):
        built = building.build_run(two_generators, config, two_generators.dataset_info(config),
                                   tf.distribute.get_strategy())
    assert [layer.name for layer in built.models["discriminator"].layers[1:]] == ["users_own"]
    assert built.models["generator_a"].count_params() == \
        networks.mlp_generator(latent_dim=4, width=8).count_params()
    # The generators' rate is --g_lr, the discriminator's --d_lr (the base class's rates).
    assert [float(built.optimizers[name].learning_rate) for name in (*GENERATORS, "discriminator")] \
        == pytest.approx([config.g_lr, config.g_lr, config.d_lr])
    with pytest.raises(ConfigError, match=rf"--generator='m:f' is invalid: --setup={NAME} has no "
                                          r"generator a user network can fill \(its models: "
                                          r"discriminator\)"):
        _config(tmp_path / "other", generator="m:f")


def test_the_registry_refuses_unknown_names_and_a_name_registered_twice(two_generators):
    with pytest.raises(ConfigError, match=rf"--setup='nope' is invalid: use one of .*{NAME}"):
        registry.get("nope")
    with pytest.raises(ValueError, match=rf"\['{NAME}'\] are already registered"):
        registry.register(TwoGenerators())
    assert registry.get(NAME) is two_generators


def test_an_unregistered_setup_is_gone():
    setup = TwoGenerators()
    with registry.registered(setup):
        assert NAME in registry.names()
    assert NAME not in registry.names()
    with pytest.raises(ConfigError, match="is invalid: use one of"):
        registry.resolve(Config(setup=NAME))


def test_a_flag_only_another_setup_reads_is_refused_in_training():
    with pytest.raises(ConfigError, match=r"--domain_a='fashion_mnist:Sneaker' is invalid: only "
                                          r"--setup=cyclegan reads it and this run is --setup=dcgan"):
        registry.resolve(Config(domain_a="fashion_mnist:Sneaker"))
    # Sampling reads the run's own setup from config.json: --setup is not the run's there.
    assert registry.resolve(Config(mode="sample", direction="ba")).direction == "ba"


def test_a_test_setups_flags_are_declared_once_and_refused_in_another_setups_training(
        two_generators):
    assert (declared()["mixture_width"].owner, declared()["mixture_width"].fixed_on_resume) == \
        (NAME, True)
    with pytest.raises(ValueError, match="--mixture_width is declared twice"):
        declare("elsewhere", Flag("mixture_width", int, 1, help="again"))
    with pytest.raises(ConfigError, match=rf"--mixture_width=8 is invalid: only --setup={NAME} "
                                          r"reads it and this run is --setup=dcgan"):
        registry.resolve(Config(mixture_width=8))


def test_flags_are_checked_without_importing_tensorflow():
    code = ("import sys\n"
            "import trainers.api\n"
            "from trainers.config.flags import Config, ConfigError\n"
            "from trainers.setups import registry\n"
            "try:\n"
            "    registry.resolve(Config(setup='cyclegan', domain_a='a', domain_b='b', penalty='r1'))\n"
            "except ConfigError as error:\n"
            "    print(error)\n"
            "print('tensorflow' in sys.modules)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
                                os.path.abspath(__file__))))), check=True)
    assert result.stdout.splitlines() == [
        "--penalty='r1' is invalid: only --setup=dcgan|wgan|wgan_gp|lsgan|sngan|r1|r3gan|cgan|acgan "
        "reads it and this run is --setup=cyclegan; drop it, or train one of those.", "False"]
