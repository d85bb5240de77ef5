"""`--generator`/`--discriminator`: every bad value is refused with a message naming the flag,
the conditional contracts (cgan, acgan) build, a model passed from Python is copied into the
strategy's scope, and saved architectures are loaded back without calling user code."""

import dataclasses

import numpy as np
import pytest
import tensorflow as tf

from trainers.config.flags import Config, ConfigError
from trainers.setups import building, registry, user_networks

HELPERS = "tests.trainers.setups.user_models"
TINY = dict(batch_size=16, latent_dim=8, cycles_per_loop=2, shuffle_buffer=64)


def config(tmp_path, **flags) -> Config:
    return registry.resolve(Config(logdir=str(tmp_path / "run"), **{**TINY, **flags}))


def build(config_: Config):
    setup = registry.get(config_.setup)
    return building.build_run(setup, config_, setup.dataset_info(config_),
                              tf.distribute.get_strategy())


@pytest.mark.parametrize("flags, message", [
    (dict(generator="no_colon"), "--generator='no_colon' is invalid: use module.path:function"),
    (dict(generator=f"{HELPERS}:make_generator", mode="sample"),
     "is read by --mode=train only; --mode=sample rebuilds the run's networks from LOGDIR/networks"),
    (dict(generator=f"{HELPERS}:make_generator", setup="cyclegan", domain_a="fashion_mnist:Sneaker",
          domain_b="fashion_mnist:Bag", latent_dim=Config.latent_dim),  # cyclegan reads no noise
     f"--generator='{HELPERS}:make_generator' is invalid: --setup=cyclegan has no generator a "
     "user network can fill"),
    (dict(discriminator=f"{HELPERS}:make_discriminator", pack=2),
     "--pack=2 with --discriminator=" ),
    (dict(generator=f"{HELPERS}:make_generator", precision="mixed_bfloat16"),
     "--precision='mixed_bfloat16' with --generator="),
    (dict(generator=f"{HELPERS}:make_generator", g_width=8),
     f"--g_width=8 changes the built-in generator, which --generator='{HELPERS}:make_generator' "
     "replaces: drop it."),
    (dict(generator=f"{HELPERS}:make_generator", discriminator=f"{HELPERS}:make_discriminator",
          arch="resnet"),
     "--arch='resnet' picks the built-in networks, and --generator and --discriminator replace "
     "both: drop --arch."),
])
def test_flags_a_user_network_cannot_take_are_refused_before_tensorflow_builds(tmp_path, flags, message):
    with pytest.raises(ConfigError) as raised:
        config(tmp_path, **flags)
    assert message in str(raised.value)


@pytest.mark.parametrize("value, message", [
    ("no_such_module_xyz:make", "--generator='no_such_module_xyz:make': module "
     "'no_such_module_xyz' cannot be imported (No module named 'no_such_module_xyz'); put the "
     "directory that holds it on PYTHONPATH"),
    (f"{HELPERS}:missing", f"--generator='{HELPERS}:missing': module '{HELPERS}' has no attribute "
     "'missing'"),
    (f"{HELPERS}:NOT_CALLABLE", "names a int, which is not callable; name a function returning a "
     "keras.Model"),
    (f"{HELPERS}:no_keyword_arguments", "cannot be called with the keyword arguments latent_dim, "
     "shape, num_classes, classifier"),
    (f"{HELPERS}:returns_a_layer", "returned a Dense, not a keras.Model"),
    (f"{HELPERS}:wrong_shape_generator", "its model maps noise [2, 8] to outputs of shape (2, 5); "
     "this run needs (2, 28, 28, 1) (2 examples of shape (28, 28, 1))"),
    (f"{HELPERS}:half_precision_generator", "its model outputs float16; this run needs float32"),
    (f"{HELPERS}:raises_inside", f"--generator='{HELPERS}:raises_inside' raised ValueError: no "
     "network for latent_dim=8 ("),
])
def test_each_bad_generator_is_named_before_training(tmp_path, value, message):
    with pytest.raises(ConfigError) as raised:
        build(config(tmp_path, generator=value))
    assert message in str(raised.value)


def test_a_discriminator_with_the_wrong_inputs_or_outputs_is_refused(tmp_path):
    with pytest.raises(ConfigError) as raised:
        build(config(tmp_path, discriminator=f"{HELPERS}:make_generator"))
    assert (f"--discriminator='{HELPERS}:make_generator': its model cannot be called on 2 examples "
            "of shape (28, 28, 1): ValueError: Input 0 with name" in str(raised.value))
    with pytest.raises(ConfigError) as raised:  # on the toys, G maps [N, 2] to [N, 2]
        build(config(tmp_path, dataset="ring8", latent_dim=2,
                     discriminator=f"{HELPERS}:make_generator"))
    assert ("its model maps 2 examples of shape (2,) to outputs of shape (2, 2); this run needs "
            "(2, 1) (one logit per example)" in str(raised.value))


@pytest.mark.parametrize("gan, outputs", [("cgan", [(2, 1)]), ("acgan", [(2, 1), (2, 10)])])
def test_conditional_setups_call_user_networks_with_labels(tmp_path, gan, outputs):
    built = build(config(tmp_path, setup=gan, generator=f"{HELPERS}:make_generator",
                         discriminator=f"{HELPERS}:make_discriminator"))
    images = built.sampling.sample(tf.zeros([2, 8]))
    assert images.shape == (2, 28, 28, 1)
    discriminator = built.models["discriminator"]
    given = images if gan == "acgan" else [images, tf.constant([3, 4])]
    assert [tuple(o.shape) for o in tf.nest.flatten(discriminator(given))] == outputs


def test_saved_architectures_are_loaded_instead_of_calling_user_code(tmp_path):
    run = config(tmp_path, dataset="ring8", generator=f"{HELPERS}:make_generator",
                 discriminator=f"{HELPERS}:make_discriminator_with_custom_layer")
    first = build(run)
    user_networks.save_architectures(run, first.models, ("generator", "discriminator"))
    # A flag value naming nothing importable: only the saved files can serve it now.
    renamed = dataclasses.replace(run, generator="gone:make", discriminator="gone:make")
    again = build(renamed)
    for role in ("generator", "discriminator"):
        assert [w.shape for w in again.models[role].weights] == [w.shape for w in first.models[role].weights]
    assert type(again.models["discriminator"].layers[2]).__name__ == "Scale"


def test_a_model_keras_cannot_rebuild_is_refused_when_saved(tmp_path):
    import keras

    class Unregistered(keras.layers.Layer):
        def __init__(self, factor, **kwargs):  # no get_config: Keras cannot rebuild it
            super().__init__(**kwargs)
            self.factor = factor

        def call(self, inputs):
            return inputs * self.factor

    inputs = keras.Input((2,))
    model = keras.Model(inputs, keras.layers.Dense(1)(Unregistered(2.0)(inputs)))
    run = config(tmp_path, dataset="ring8", discriminator="instance:Functional")
    with pytest.raises(ConfigError) as raised:
        user_networks.save_architectures(run, {"discriminator": model}, ("discriminator",))
    assert "--discriminator='instance:Functional': its model cannot be saved and rebuilt" in str(raised.value)
    assert "register_keras_serializable" in str(raised.value)


def test_a_supplied_model_is_copied_with_its_weights_into_the_strategy_scope(tmp_path):
    from tests.trainers.setups import user_models
    model = user_models.make_generator(latent_dim=8, shape=(2,), num_classes=0, classifier=False)
    run = config(tmp_path, dataset="ring8", generator="instance:Functional")
    setup = registry.get(run.setup)
    with user_networks.supplied({"generator": model}):
        built = building.build_run(setup, run, setup.dataset_info(run),
                            tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]))
    copy = built.models["generator"]
    assert copy is not model
    assert all(isinstance(weight.value, tf.distribute.DistributedValues) for weight in copy.weights)
    for copied, original in zip(copy.get_weights(), model.get_weights(), strict=True):
        np.testing.assert_array_equal(copied, original)


def test_a_run_whose_saved_network_is_missing_is_not_rebuilt_from_user_code(tmp_path):
    run = config(tmp_path, generator=f"{HELPERS}:make_generator")
    with pytest.raises(ConfigError) as raised:
        user_networks.require_saved(run, ("generator", "discriminator"))
    assert str(raised.value).startswith(
        f"{tmp_path}/run/networks/generator.keras is missing: this run's --generator="
        f"'{HELPERS}:make_generator' is rebuilt from it.")
    user_networks.require_saved(config(tmp_path), ("generator", "discriminator"))  # built-in: none
