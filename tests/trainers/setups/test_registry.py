"""The registry's resolution of the built-in setups: presets, validation and setup checks."""

import pytest

from trainers.config.fields import Config, ConfigError
from trainers.config.flags import check_preset
from trainers.setups import registry


def test_every_built_in_name_resolves_to_its_own_preset():
    for name in registry.names():
        preset = check_preset(name, registry.get(name).presets[name])
        resolved = registry.resolve(Config(setup=name, mode="sample"))
        assert {flag: getattr(resolved, flag) for flag in preset} == preset, name


def test_the_batch_size_is_validated_after_the_preset_fills_it():
    batch = registry.get("dcgan").presets["dcgan"]["batch_size"]
    with pytest.raises(ConfigError, match=f"--batch_size={batch} is invalid"):
        registry.resolve(Config(setup="dcgan", cpu_replicas=batch + 1))


def test_setups_without_packing_refuse_pack():
    for name in ("cgan", "cyclegan"):
        with pytest.raises(ConfigError, match="--pack=2 is invalid"):
            registry.resolve(Config(setup=name, pack=2, domain_a="fashion_mnist:0",
                                    domain_b="fashion_mnist:1") if name == "cyclegan"
                             else Config(setup=name, pack=2))
