"""Flag declarations: each flag is declared once, by the module that reads it, with every fact
about it; `Config`, `--help`, the HParams columns, the resume check, the path checks, the
presets' checks and the flag reference are all derived from the declarations.

As with absl's own flags, a module declares its flags when it is imported (`declare`): each
owner shared by several setups in a flags module beside the code that reads them
(`config.run_flags`, `engine.flags`, `setups.adversarial_flags`, `engine.ema_flags`,
`engine.privacy_flags`, `outputs.flags`, `evaluation.flags`, `modes.flags`), each setup's own in
its module. The order of declaration is `Config`'s field order and docs/flags.md's:
`trainers.api` imports the shared owners' modules first, in that order, then the setups
(`setups.registry`), so import `trainers.api` (as `run.py` and the tests' conftest do) before
making a `Config` or importing any other module of Gantry's. `Config` is a dataclass made from
the flags declared when a config is constructed (a user's setup may declare more later; a config
made before reads such a flag's default).

Pure Python: run.py checks flags before TensorFlow is imported.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any, Iterable, Mapping

DIRECTORY, FILE = "directory", "file"
VALUE_TYPES = (bool, int, float, str)


class ConfigError(ValueError):
    """A flag has a bad value; the message says which, why and how to fix it."""


class _Unset:
    """The `Flag.neutral` of a preset flag that every preset must give."""

    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED = _Unset()


@dataclasses.dataclass(frozen=True)
class Flag:
    """One flag and every fact about it.

    `type` is bool, int, float or str; `default` its value when not given, None for a flag
    that is filled later (a preset flag, or one whose None means "the data's own"). `choices`
    is the closed set of values (`validation` refuses others; `run.py` lists them in the help).
    `path` (DIRECTORY or FILE) marks a filesystem path, `written_by` the modes that write it
    (`paths.check_paths`); a path is never an HParams column. `fixed_on_resume`: a resumed run
    must keep the value it started with (it changes the variables, the schedule or the data
    order). `hparam`: an HParams column (False for what changes neither what is trained nor how
    it is scored: the other modes' flags, how often a run logs or saves). `preset`: a setup's
    preset fills it when it is not given (`default` is then None). `neutral`: the value that
    leaves behaviour as it was before the flag existed: a run recorded without the flag takes
    it, and for a preset flag, a preset that does not name it (REQUIRED: every preset of a
    setup that reads it must). `renamed_from`: older names, still accepted with a notice.
    `takes_over`: flags of another owner that set this one's value in the setups reading its
    owner and not theirs, as they did before it existed (`--d_lr` is the student's
    `--student_lr` in distill): given there, they are taken as this flag with a notice
    (`taken_over`), and a run recorded before it keeps their recorded value. `owner`, set by
    `declare`: the part of Gantry that reads it (a setup reads the common owners' flags and
    those of its `Setup.flag_owners`; another owner's flags are refused in its training run).
    """

    name: str
    type: type
    default: Any
    help: str
    choices: tuple[str, ...] = ()
    path: str | None = None
    written_by: tuple[str, ...] = ()
    fixed_on_resume: bool = False
    hparam: bool = True
    preset: bool = False
    neutral: Any = None
    renamed_from: tuple[str, ...] = ()
    takes_over: tuple[str, ...] = ()
    owner: str = ""

    def __post_init__(self):
        if self.type not in VALUE_TYPES:
            raise TypeError(f"Flag {self.name}: type must be one of {VALUE_TYPES}.")
        if self.neutral is None and not self.preset:
            object.__setattr__(self, "neutral", self.default)

    @property
    def is_hparam(self) -> bool:
        return self.hparam and not self.path


_DECLARED: dict[str, Flag] = {}
_OLD_NAMES: dict[str, str] = {}
_COMMON_OWNERS: set[str] = set()
_CONFIG_CLASSES: dict[int, type] = {}  # number of flags declared -> the Config dataclass


def declare(owner: str, *flags: Flag, common: bool = False) -> tuple[str, ...]:
    """Registers `flags` as read by `owner`; returns their names. A `common` owner's flags are
    read by every setup (which refuses the values it cannot use in `Setup.check_flags`); any
    other owner's only by the setups naming it in `Setup.flag_owners`. A name (or old name)
    declared twice is an error."""
    if common:
        _COMMON_OWNERS.add(owner)
    for flag in flags:
        taken = [name for name in (flag.name, *flag.renamed_from) if name in _DECLARED or name in _OLD_NAMES]
        if taken:
            raise ValueError(f"Flag --{taken[0]} is declared twice (by {owner} and by "
                             f"{_owner_of(taken[0])}); each flag has one owner.")
        _DECLARED[flag.name] = dataclasses.replace(flag, owner=owner)
        _OLD_NAMES.update({old: flag.name for old in flag.renamed_from})
    return tuple(flag.name for flag in flags)


def _owner_of(name: str) -> str:
    return _DECLARED[_OLD_NAMES.get(name, name)].owner


def declared() -> Mapping[str, Flag]:
    """Every declared flag by name, in declaration order."""
    return dict(_DECLARED)


def read_by(owners: Iterable[str]) -> dict[str, Flag]:
    """The declared flags a setup naming `owners` in `Setup.flag_owners` reads: theirs and
    the common owners' (`declare`)."""
    reading = _COMMON_OWNERS | set(owners)
    return {name: flag for name, flag in _DECLARED.items() if flag.owner in reading}


def old_names() -> Mapping[str, str]:
    """Every old flag name (`Flag.renamed_from`) -> its flag's name."""
    return dict(_OLD_NAMES)


def renamed(values: Mapping[str, Any], notify=None) -> dict[str, Any]:
    """`values` (flag name -> value) with old flag names replaced by the new ones; `notify` (by
    default a line on stderr) is told once per old name. An old and a new name given together
    with different values is a ConfigError."""
    notify = notify or (lambda line: print(line, file=sys.stderr, flush=True))
    result = {}
    for name, value in values.items():
        new = _OLD_NAMES.get(name)
        if new is None:
            result.setdefault(name, value)
            continue
        notify(f"notice: --{name} is now --{new}; --{name} still works.")
        if new in values and values[new] != value:
            raise ConfigError(f"--{name}={value!r} and --{new}={values[new]!r}: --{name} is the old "
                              f"name of --{new}; give only --{new}.")
        result[new] = value
    return result


def taken_over(config: Config, owners: Iterable[str], notify=None) -> Config:
    """`config` (as given, before its preset is resolved) with the flags that the flags of
    `owners`' setup take over (`Flag.takes_over`) moved to them: a flag is given when it is not
    its default. `notify` (by default a line on stderr) is told once per flag moved. The old and
    the new flag given together with different values is a ConfigError."""
    notify = notify or (lambda line: print(line, file=sys.stderr, flush=True))
    reading = read_by(owners)
    moved = {}
    for flag in reading.values():
        for old in flag.takes_over:
            value = getattr(config, old)
            if old in reading or value == _DECLARED[old].default:
                continue
            given = getattr(config, flag.name)
            if given != flag.default and given != value:
                raise ConfigError(f"--{old}={value!r} and --{flag.name}={given!r}: --setup="
                                  f"{config.setup} reads --{old} as --{flag.name}; give only "
                                  f"--{flag.name}.")
            notify(f"notice: --{old} is now --{flag.name} for --setup={config.setup}; --{old} "
                   "still works.")
            moved.update({flag.name: value, old: _DECLARED[old].default})
    return dataclasses.replace(config, **moved) if moved else config


def recorded_value(recorded: Mapping[str, Any], name: str, fallback: Any = None) -> Any:
    """Flag `name` of a run's config.json, also under an old name, or under a flag it takes
    over (`Flag.takes_over`: ask only for a flag the run's setup reads). A flag the record
    lacks did not exist when the run started: it takes its neutral value (`Flag.neutral`), or
    `fallback` when it has none."""
    flag = _DECLARED[name]
    for key in (name, *flag.renamed_from, *flag.takes_over):
        if key in recorded:
            return recorded[key]
    return fallback if flag.neutral in (None, REQUIRED) else flag.neutral


def _default_of(name: str) -> Any:
    """Flag `name`'s default; AttributeError for a name no flag has."""
    if name not in _DECLARED:
        raise AttributeError(f"Config has no flag {name!r}.")
    return _DECLARED[name].default


class _ConfigType(type):
    """`Config.NAME` is flag NAME's default, also before the first config is made."""

    def __getattr__(cls, name: str) -> Any:
        return _default_of(name)


class Config(metaclass=_ConfigType):
    """The flags of one run, one frozen field each (a dataclass made from the declarations).

    `Config(**values)` takes any declared flags by name; the others keep their defaults. Preset
    flags are None until `presets.resolve_preset` fills them, and `train_cycles` until
    `presets.resolve_train_cycles` does (None after it: no cycle limit).
    """

    def __new__(cls, *args, **values):
        if cls is Config:
            cls = _config_class()
        return super().__new__(cls)

    def __getattr__(self, name: str) -> Any:
        """A flag declared after this config was made: its default."""
        return _default_of(name)

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _config_class() -> type:
    """The dataclass of every flag declared so far."""
    if len(_DECLARED) not in _CONFIG_CLASSES:
        made = dataclasses.make_dataclass(
            "Config", [(flag.name, flag.type if flag.default is not None else flag.type | None,
                        dataclasses.field(default=flag.default)) for flag in _DECLARED.values()],
            bases=(Config,), frozen=True)
        made.__module__ = __name__
        _CONFIG_CLASSES[len(_DECLARED)] = made
    return _CONFIG_CLASSES[len(_DECLARED)]


def check_preset(name: str, values: Mapping[str, Any], owners: Iterable[str]) -> dict[str, Any]:
    """`values` of preset `name`, of a setup naming `owners` (`Setup.flag_owners`), checked
    against the declarations: only preset flags the setup reads (`read_by`), of their type,
    every REQUIRED one of them given. Returned with every preset flag: the unnamed ones it
    reads at their neutral values, the others None (nothing reads them)."""
    flags = {flag.name: flag for flag in _DECLARED.values() if flag.preset}
    reading = read_by(owners)
    problems = {
        "not preset flags": sorted(set(values) - set(flags)),
        "flags of owners it does not read": sorted(
            f"{flag} ({flags[flag].owner})" for flag in values if flag in flags and flag not in reading),
        "missing": sorted(flag for flag, spec in flags.items()
                          if flag in reading and spec.neutral is REQUIRED and flag not in values)}
    if any(problems.values()):
        raise ValueError(f"Preset {name!r}: " + "; ".join(
            f"{problem} {found}" for problem, found in problems.items() if found) + ".")
    for flag, value in values.items():
        wanted = flags[flag].type
        accepted = (int, float) if wanted is float else wanted
        if not isinstance(value, accepted) or (wanted is not bool and isinstance(value, bool)):
            raise ValueError(f"Preset {name!r}: {flag}={value!r} is not a {wanted.__name__}.")
    return {flag: values.get(flag, spec.neutral) if flag in reading else None
            for flag, spec in flags.items()}
