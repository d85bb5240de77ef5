"""The registry's resolution of the built-in setups: presets, validation and setup checks."""

import pathlib
import subprocess
import sys

import pytest

from trainers.config.flags import Config, ConfigError, Flag, check_preset, declared, read_by
from trainers.setups import registry

ROOT = pathlib.Path(__file__).resolve().parents[3]


def test_every_built_in_name_resolves_to_its_own_preset():
    for name in registry.names():
        preset = check_preset(name, registry.get(name).presets[name], registry.get(name).flag_owners)
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


# What cyclegan needs to resolve at all; every other setup resolves from its defaults.
NEEDS = {"cyclegan": dict(domain_a="fashion_mnist:Sneaker", domain_b="fashion_mnist:Sandal")}


def test_every_preset_trains_without_a_foreign_flag_error():
    for name in registry.names():
        resolved = registry.resolve(Config(setup=name, **NEEDS.get(name, {})))
        assert registry.resolve(resolved) == resolved, name  # a resolved config stays valid


def _given_value(flag: Flag):
    """A value of `flag` that is not its default."""
    if flag.choices:
        return next(choice for choice in flag.choices if choice != flag.default)
    if flag.type is bool:
        return not flag.default
    if flag.type is str:
        return "x"
    return (flag.default or 0) + (2 if flag.type is int else 0.5)


def _foreign(name: str) -> list[Flag]:
    """The declared flags setup `name` does not read and none of its flags takes over."""
    reading = read_by(registry.get(name).flag_owners)
    taken = {old for flag in reading.values() for old in flag.takes_over}
    return [flag for flag in declared().values() if flag.name not in reading
            and flag.name not in taken and flag.owner != "two_generators"]


@pytest.mark.parametrize("name, flag", [(name, flag) for name in registry.names()
                                        for flag in _foreign(name)],
                         ids=lambda item: getattr(item, "name", item))
def test_a_flag_of_an_owner_the_setup_does_not_read_is_refused(name, flag):
    value = _given_value(flag)
    readers = [other for other in registry.names()
               if flag.owner in registry.get(other).flag_owners]
    with pytest.raises(ConfigError) as error:
        registry.resolve(Config(setup=name, **{flag.name: value}, **NEEDS.get(name, {})))
    assert str(error.value) == (f"--{flag.name}={value!r} is invalid: only --setup="
                                f"{'|'.join(readers)} reads it and this run is --setup={name}; "
                                "drop it, or train one of those.")


def test_distill_refuses_the_generators_width_naming_the_setups_that_read_it():
    with pytest.raises(ConfigError, match=r"^--g_width=32 is invalid: only --setup=dcgan\|wgan\|"
                                          r"wgan_gp\|lsgan\|sngan\|r1\|r3gan\|cgan\|acgan\|cyclegan\|dfad "
                                          r"reads it and this run is --setup=distill; drop it, or "
                                          r"train one of those\.$"):
        registry.resolve(Config(setup="distill", g_width=32))


def test_the_registry_imported_before_trainers_api_says_to_import_it_first():
    result = subprocess.run([sys.executable, "-c", "import trainers.setups.registry"], cwd=ROOT,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert result.stderr.splitlines()[-1] == (
        "ImportError: The shared flags are not declared: import trainers.api (it declares every "
        "flag, in order) before trainers.setups.registry.")
