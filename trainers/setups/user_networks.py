"""Users' own Keras networks in any setup that declares the role (`Setup.network_roles`).

`--generator=module.path:function` and `--discriminator=module.path:function` name a function
that Gantry calls with the keyword arguments

- `latent_dim`: the noise size (--latent_dim);
- `shape`: the shape of one example, (H, W, C) for images, (2,) for the 2-D toys;
- `num_classes`: 0 for an unconditional setup, else the dataset's class count;
- `classifier`: True for acgan's discriminator contract (below), else False;

and that returns a `keras.Model` with the setup's call contract (what `adversarial.py` calls):

- generator: noise float32 [N, latent_dim] -> float32 [N, *shape] in [-1, 1] (images: tanh);
  conditional, generator([noise, labels]) with int32 labels [N];
- discriminator: float32 [N, *shape] -> float32 logits [N, 1]; cgan: D([images, labels]);
  acgan (`classifier`): D(images) -> (logits [N, 1], class logits [N, num_classes]).

`check` calls each model once on two examples before training, and a breach of the contract
(module not importable, no such attribute, not callable, not a model, a wrong output shape or
dtype) is a ConfigError naming the flag. The Python API passes a model or a function directly
(`supplied`); a model is copied (its weights too) inside the strategy's scope, so Gantry trains
the copy.

The chief saves each user network with Keras's own format in LOGDIR/networks/<role>.keras at
the start of a run (`save_architectures`), and every later build of the run (resume, sample,
eval, export) loads that file instead of calling user code; the checkpoint then restores the
weights. Custom layers are found through `keras.saving.register_keras_serializable`: the
modules the file names are imported first, and one that cannot be is a ConfigError naming it.

TensorFlow and Keras are imported inside the functions that build (see `protocol`).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import inspect
import io
import json
import os
import tempfile
import zipfile
from typing import TYPE_CHECKING, Any, Iterator, Mapping

from datasets import files
from trainers.config.flags import Config, ConfigError, Flag, declare

if TYPE_CHECKING:
    import keras

NETWORKS_SUBDIR = "networks"
# Every flag that can name a user network; a setup declares which of them it has
# (`Setup.network_roles`, checked by `check_flags`), so every setup reads these (common).
ROLE_FLAGS = declare(
    "user_networks",
    Flag('generator', str, '',
         help='Your own generator: module.path:function, called with keyword arguments latent_dim, '
              'shape and num_classes, returning a keras.Model (docs/extending.md); empty: '
              'the built-in one. Saved in LOGDIR/networks.',
         fixed_on_resume=True),
    Flag('discriminator', str, '',
         help='Your own discriminator: module.path:function, called like --generator; empty: the '
              'built-in one.',
         fixed_on_resume=True),
    common=True,
)
# Flags of the built-in networks, which a user network would silently ignore.
BUILT_IN_NETWORK_FLAGS = {"generator": ("g_width", "g_extra_blocks", "g_upsample"),
                          "discriminator": ("d_width", "d_extra_blocks", "d_dropout")}
_CHECK_BATCH = 2
_supplied: dict[str, Any] = {}


def uses_user_network(config: Config) -> bool:
    """Whether the run replaces a built-in network with a user's (--generator, --discriminator)."""
    return any(getattr(config, role) for role in ROLE_FLAGS)


def check_flags(config: Config, roles: tuple[str, ...]) -> None:
    """Refuses, in pure Python, a user network the run cannot use: a role the setup does not
    have, a value not of the form module:function, a mode other than train, mixed precision,
    packing, or a flag of the built-in network it replaces (`--arch` when it replaces all)."""
    for role in ROLE_FLAGS:
        spec = getattr(config, role)
        if not spec:
            continue
        flag = f"--{role}={spec!r}"
        if config.mode != "train":
            raise ConfigError(
                f"{flag} is read by --mode=train only; --mode={config.mode} rebuilds the run's "
                f"networks from LOGDIR/{NETWORKS_SUBDIR}: drop it.")
        if role not in roles:
            raise ConfigError(
                f"{flag} is invalid: --setup={config.setup} has no {role} a user network can fill "
                f"(its models: {', '.join(roles) or 'its own'}); drop it, or train a generator/"
                "discriminator setup such as dcgan, cgan or acgan.")
        module, _, attribute = spec.partition(":")
        if not module or not attribute or any(c.isspace() for c in spec):
            raise ConfigError(f"{flag} is invalid: use module.path:function, e.g. "
                              f"my_networks:make_{role}.")
        if config.precision not in ("float32", "auto"):  # auto: float32 with a user network
            raise ConfigError(
                f"--precision={config.precision!r} with {flag}: a user network keeps the dtype "
                "policy it was built with, which export could not turn back into float32; use "
                "--precision=float32 or auto.")
        if role == "discriminator" and config.pack != 1:
            raise ConfigError(f"--pack={config.pack!r} with {flag}: packing is part of the built-in "
                              "discriminator; use --pack=1 (or pack inside your network).")
        for built_in in BUILT_IN_NETWORK_FLAGS[role]:
            if getattr(config, built_in) != getattr(Config, built_in):
                raise ConfigError(
                    f"--{built_in}={getattr(config, built_in)!r} changes the built-in {role}, "
                    f"which {flag} replaces: drop it.")
    if roles and all(getattr(config, role) for role in roles) and config.arch != Config.arch:
        raise ConfigError(
            f"--arch={config.arch!r} picks the built-in networks, and --generator and "
            "--discriminator replace both: drop --arch.")


def describe(network: Any) -> str:
    """The flag value recorded for a network passed from Python: `module:qualname` of a
    function, `instance:ClassName` of a model (stable across processes, so a resume with the
    same models matches the record)."""
    import keras
    if isinstance(network, keras.Model):
        return f"instance:{type(network).__qualname__}"
    if callable(network):
        return f"{network.__module__}:{getattr(network, '__qualname__', type(network).__qualname__)}"
    raise ConfigError(f"A {type(network).__name__} was passed as a network: pass a keras.Model or "
                      "a function returning one.")


@contextlib.contextmanager
def supplied(networks: Mapping[str, Any]) -> Iterator[None]:
    """Within the block, the roles of `networks` are built from these models or functions
    (the Python API's `train(generator=..., discriminator=...)`) instead of their flags."""
    _supplied.update(networks)
    try:
        yield
    finally:
        for role in networks:
            _supplied.pop(role, None)


def architecture_path(logdir: str, role: str) -> str:
    return os.path.join(logdir, NETWORKS_SUBDIR, f"{role}.keras")


def build(config: Config, role: str, *, shape: tuple[int, ...], num_classes: int = 0,
          classifier: bool = False) -> keras.Model:
    """The user's `role` network of this run: loaded from LOGDIR/networks when the run saved it,
    else from the supplied model or function, or the flag's module:function; checked against
    the setup's call contract (module docstring). Call inside the strategy's scope."""
    spec = getattr(config, role)
    path = architecture_path(config.logdir, role)
    if files.exists(path):
        model = load(path, role, spec)
    else:
        model = _from_user(role, spec, _supplied.get(role), dict(
            latent_dim=config.latent_dim, shape=tuple(shape), num_classes=num_classes,
            classifier=classifier and role == "discriminator"))
    check(model, role, spec, latent_dim=config.latent_dim, shape=tuple(shape),
          num_classes=num_classes, classifier=classifier)
    return model


def resolve(role: str, spec: str):
    """The object `module.path:function` names, imported; ConfigError naming the flag."""
    module_name, _, attribute = spec.partition(":")
    flag = f"--{role}={spec!r}"
    try:
        module = importlib.import_module(module_name)
    except (ImportError, TypeError) as error:  # TypeError: a relative name such as ".x"
        raise ConfigError(
            f"{flag}: module {module_name!r} cannot be imported ({error}); put the directory "
            "that holds it on PYTHONPATH (or sys.path), or fix the name.") from None
    except Exception as error:  # noqa: BLE001  the module itself failed while importing
        raise ConfigError(f"{flag}: importing module {module_name!r} raised "
                          f"{type(error).__name__}: {error}; fix the module.") from None
    try:
        return functools.reduce(getattr, attribute.split("."), module)
    except AttributeError:
        raise ConfigError(f"{flag}: module {module_name!r} has no attribute {attribute!r}; name a "
                          f"function defined in {module.__file__}.") from None


def _from_user(role: str, spec: str, network: Any, arguments: dict[str, Any]) -> keras.Model:
    import keras
    if network is None:
        network = resolve(role, spec)
    flag = f"--{role}={spec!r}"
    if isinstance(network, keras.Model):
        return _copy(network)
    if not callable(network):
        raise ConfigError(f"{flag} names a {type(network).__name__}, which is not callable; name a "
                          f"function returning a keras.Model.")
    try:
        inspect.signature(network).bind(**arguments)
    except TypeError as error:
        raise ConfigError(
            f"{flag} cannot be called with the keyword arguments {', '.join(arguments)} ({error}); "
            "accept them (or **kwargs).") from None
    except ValueError:  # no signature to inspect (a builtin): let the call say
        pass
    try:
        model = network(**arguments)
    except Exception as error:  # noqa: BLE001  a failure of user code, named with where it rose
        raise ConfigError(f"{flag} raised {type(error).__name__}: {error} ({_origin(error)}); fix "
                          "the function, then rerun.") from None
    if not isinstance(model, keras.Model):
        raise ConfigError(f"{flag} returned a {type(model).__name__}, not a keras.Model; return "
                          "the model (keras.Model, keras.Sequential or a subclass).")
    return model


def _origin(error: Exception) -> str:
    """Where `error` was raised: the innermost frame's file and line."""
    import traceback
    frame = traceback.extract_tb(error.__traceback__)[-1]
    return f"{frame.filename}, line {frame.lineno}"


def _copy(model: keras.Model) -> keras.Model:
    """A new model of `model`'s architecture and weights, its variables made in the current
    (strategy) scope."""
    import keras
    copy = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(model))
    if model.built and copy.built:
        copy.set_weights(model.get_weights())
    return copy


def check(model: keras.Model, role: str, spec: str, *, latent_dim: int, shape: tuple[int, ...],
          num_classes: int, classifier: bool) -> None:
    """Calls `model` once on two examples and compares its outputs with the contract."""
    import tensorflow as tf
    batch = _CHECK_BATCH
    labels = tf.zeros([batch], tf.int32)
    if role == "generator":
        given, what = tf.zeros([batch, latent_dim]), f"noise [{batch}, {latent_dim}]"
        expected = [(batch, *shape)]
        meaning = f"{batch} examples of shape {shape}"
    else:
        given, what = tf.zeros([batch, *shape]), f"{batch} examples of shape {shape}"
        expected = [(batch, 1)] + ([(batch, num_classes)] if classifier else [])
        meaning = ("one logit per example, and class logits" if classifier
                   else "one logit per example")
    if num_classes and not (role == "discriminator" and classifier):
        given, what = [given, labels], f"[{what}, int32 labels [{batch}]]"
    flag = f"--{role}={spec!r}"
    try:
        outputs = model(given, training=False)
    except Exception as error:  # noqa: BLE001  any failure of user code is a contract breach
        first_line = (str(error).strip().splitlines() or [""])[0]
        raise ConfigError(f"{flag}: its model cannot be called on {what}: "
                          f"{type(error).__name__}: {first_line}") from None
    outputs = tf.nest.flatten(outputs)
    shapes = [tuple(output.shape) for output in outputs]
    if shapes != expected:
        raise ConfigError(f"{flag}: its model maps {what} to outputs of shape "
                          f"{', '.join(map(str, shapes))}; this run needs {', '.join(map(str, expected))} "
                          f"({meaning}).")
    dtypes = sorted({output.dtype.name for output in outputs} - {"float32"})
    if dtypes:
        raise ConfigError(f"{flag}: its model outputs {', '.join(dtypes)}; this run needs float32 "
                          "(give its last layer dtype='float32').")


def save_architectures(config: Config, models: Mapping[str, keras.Model],
                       roles: tuple[str, ...]) -> None:
    """Saves each user network of the run (`roles` whose flag is set) to LOGDIR/networks/
    <role>.keras once, atomically; it is loaded back first, so a model that could not be
    rebuilt without the user's code is refused now, not at sample time."""
    import keras
    for role in roles:
        spec, path = getattr(config, role), architecture_path(config.logdir, role)
        if not spec or files.exists(path):
            continue
        with tempfile.TemporaryDirectory() as staging:
            local = os.path.join(staging, f"{role}.keras")
            models[role].save(local)
            try:
                keras.saving.load_model(local, compile=False)
            except Exception as error:  # noqa: BLE001  Keras raises several types here
                raise ConfigError(
                    f"--{role}={spec!r}: its model cannot be saved and rebuilt by Keras "
                    f"({type(error).__name__}: {str(error).strip().splitlines()[0]}); define "
                    "custom layers in a module and register them with "
                    "@keras.saving.register_keras_serializable() (docs/extending.md).") from None
            with open(local, "rb") as handle:
                data = handle.read()
        files.makedirs(os.path.dirname(path))
        files.write_atomically(path, lambda handle: handle.write(data))


def require_saved(config: Config, roles: tuple[str, ...]) -> None:
    """Refuses to rebuild a run (sample, eval, export) whose user networks are not saved in
    LOGDIR/networks: only the user's code could build them, which these modes never call."""
    for role in roles:
        spec, path = getattr(config, role), architecture_path(config.logdir, role)
        if spec and not files.exists(path):
            raise ConfigError(
                f"{path} is missing: this run's --{role}={spec!r} is rebuilt from it. Restore it "
                "from a copy of the run directory (training saves it before the first cycle).")


def custom_modules(config: Any) -> list[str]:
    """The modules, other than Keras's, of the classes a saved model's config names."""
    found: dict[str, None] = {}
    if isinstance(config, dict):
        module = config.get("module")
        if isinstance(module, str) and "class_name" in config and module.split(".")[0] not in (
                "keras", "builtins"):
            found[module] = None
        for value in config.values():
            found.update(dict.fromkeys(custom_modules(value)))
    elif isinstance(config, list):
        for value in config:
            found.update(dict.fromkeys(custom_modules(value)))
    return list(found)


def load(path: str, role: str, spec: str) -> keras.Model:
    """The model saved in `path`, after importing the modules its custom classes come from."""
    import keras
    with files.open_file(path, "rb") as handle:
        data = handle.read()
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        saved = json.loads(archive.read("config.json"))
    for module in custom_modules(saved):
        try:
            importlib.import_module(module)
        except ImportError as error:
            raise ConfigError(
                f"{path} (this run's --{role}={spec!r}) uses custom Keras classes from module "
                f"{module!r}, which cannot be imported here ({error}); add the directory that "
                f"holds {module.replace('.', '/')}.py to PYTHONPATH (or sys.path) and rerun.") from None
    try:
        return keras.saving.load_model(path, compile=False)
    except Exception as error:  # noqa: BLE001  Keras raises several types for a class it lacks
        raise ConfigError(
            f"{path} (this run's --{role}={spec!r}) cannot be rebuilt: {type(error).__name__}: "
            f"{str(error).strip().splitlines()[0]}; its custom classes must be registered with "
            "@keras.saving.register_keras_serializable() in an importable module.") from None
