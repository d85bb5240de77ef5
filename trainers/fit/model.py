"""The Keras path: `model.fit` over Gantry's phases, so that Keras callbacks drive the run.

`AdversarialModel.train_step` runs ONE CYCLE of the phase schedule through the Gantry trainer's
own `cycle.run_cycle`, with the same update step (`steps.make_replica_update`) and so the same
per-update noise keys (`phases.update_seed` of the model's cycle counter): a fit step and a
trainer cycle that start from the same weights and see the same batches end with the same
parameters.

Data contract. `fit` takes an ordinary `tf.data.Dataset` of batches of `global_batch_size`
examples: images (or points), (images, labels) pairs, or dicts {"x" or "image", "label"}; uint8
images are scaled to [-1, 1], float ones are taken as they are (the networks' range, [-1, 1]).
A batch dimension left unknown (`batch` without `drop_remainder`) is fine: the last, partial
batch is dropped. Keras hands `train_step` one element per step, but a cycle needs one fresh
real global batch per data-using update (`batches_per_cycle`: k for k:1 GAN training), so `fit`
passes the data through `cycle_batches`, which stacks S = batches_per_cycle consecutive batches
on axis 1, e.g. {"x": [B, S, 28, 28, 1], "label": [B, S]}, slot s being the s-th batch the cycle
consumes (phases in order, repeats in order): the batches the Gantry trainer draws, in order.
Axis 0 stays the batch axis so that Keras's `experimental_distribute_dataset` gives replica r
rows r*B/N..(r+1)*B/N of every batch, the rows `StepInputs` gives it of the noise. A lazy data
phase (`every` > 1) keeps its slots every cycle and discards them when it sleeps (the trainer
draws no batch for it then, so after that cycle the two paths see other batches). One fit step
is one cycle: `steps_per_epoch` counts cycles.

Metrics. Each phase reports "<phase>/<name>" for every name of `steps.reported_metrics` (loss,
its declared metrics, grad_norm, learning_rate, nonfinite, ...), each a `keras.metrics.Mean`
over the updates of the epoch (Keras resets them every epoch); a phase that did not run in an
epoch reports 0. Loss shares are multiplied by the replica count before they reach a tracker:
each replica then records its own rows' mean, and Keras's SUM-on-read trackers average those
into the global mean without an extra all-reduce. EarlyStopping and ReduceLROnPlateau on these
keys need an explicit `mode=` (Keras infers it only for "loss").

Limits. Only `save_weights`/`load_weights` are supported (phases hold Python callables, so
`model.save` cannot serialise the model), and there is no evaluation step.
"""

from __future__ import annotations

import itertools
from typing import Any, Callable, Mapping, Sequence

import keras
import numpy as np
import tensorflow as tf

from trainers.engine import phases as phases_lib
from trainers.config.flags import Config, ConfigError
from trainers.setups import building, registry
from trainers.engine.cycle import run_cycle
from trainers.engine.steps import make_replica_update, replica_cond, reported_metrics

# `compile(d_optimizer=..., g_optimizer=...)` are shortcuts for these optimizer names.
SHORTCUT_PHASES = {"d_optimizer": "discriminator", "g_optimizer": "generator"}


def as_example_batch(element: Any) -> dict[str, tf.Tensor]:
    """A batch of images, (images, labels) or a dict {"x" or "image", "label"} as Gantry's
    examples {"x"[, "label"]}; uint8 images scaled to [-1, 1]."""
    if isinstance(element, Mapping):
        batch = {("x" if key == "image" else key): value for key, value in element.items()}
    elif isinstance(element, tuple) and len(element) == 2:
        batch = {"x": element[0], "label": element[1]}
    else:
        batch = {"x": element}
    if batch["x"].dtype == tf.uint8:
        batch["x"] = tf.cast(batch["x"], tf.float32) / 127.5 - 1.0
    return batch


class PhaseOptimizers:
    """`model.optimizer` after compile: the phase optimizers as one Keras optimizer group.

    Keras 3.15's ReduceLROnPlateau, LearningRateScheduler and TensorBoard treat an optimizer
    with an `optimizers` attribute as a group (the `keras.optimizers.MultiOptimizer` protocol):
    they act on every member and log "learning_rate_<name>". compile names each optimizer after
    its key (`Phase.optimizers`; a phase's own name by default), so TensorBoard logs
    "learning_rate_discriminator" and so on. `iterations` is the
    cycle counter (one per fit step). The group applies nothing and is not saved; its members
    are, as `model.phase_optimizers`.
    """

    built = True

    def __init__(self, optimizers: Sequence[keras.optimizers.Optimizer], iterations):
        self.optimizers = list(optimizers)
        self.iterations = iterations


def with_shortcuts(
    optimizers: Mapping[str, keras.optimizers.Optimizer] | None,
    *,
    d_optimizer: keras.optimizers.Optimizer | None,
    g_optimizer: keras.optimizers.Optimizer | None,
) -> dict[str, keras.optimizers.Optimizer]:
    """`optimizers` with the `d_optimizer`/`g_optimizer` shortcuts added under their names
    (`SHORTCUT_PHASES`); ValueError when a shortcut and its name are both given."""
    optimizers = dict(optimizers or {})
    for keyword, shortcut in (("d_optimizer", d_optimizer), ("g_optimizer", g_optimizer)):
        if shortcut is None:
            continue
        if SHORTCUT_PHASES[keyword] in optimizers:
            raise ValueError(f"{keyword}= and optimizers[{SHORTCUT_PHASES[keyword]!r}] both "
                             "set that optimizer; give one.")
        optimizers[SHORTCUT_PHASES[keyword]] = shortcut
    return optimizers


def check_optimizers(optimizers: Mapping[str, keras.optimizers.Optimizer],
                     phases: Sequence[phases_lib.Phase],
                     learning_rate_scales: Mapping[str, tf.Variable] | None) -> None:
    """ValueError unless `optimizers` holds exactly one distinct optimizer per optimizer name of
    `phases`, and `learning_rate_scales` names only those."""
    names = list(phases_lib.optimizer_models(phases))
    if sorted(optimizers) != sorted(names):
        raise ValueError(
            f"compile got optimizers for {sorted(optimizers)} but the phases are "
            f"{[phase.name for phase in phases]}, which use the optimizers {names}; "
            "give exactly one optimizer per name.")
    if len({id(o) for o in optimizers.values()}) < len(optimizers):
        raise ValueError("Two names share one optimizer instance; give each its own (its "
                         "iteration count is the update count of the phases naming it), or "
                         "let the phases name one optimizer with Phase.optimizers.")
    unknown = sorted(set(learning_rate_scales or {}) - set(names))
    if unknown:
        raise ValueError(f"learning_rate_scales for unknown optimizers {unknown}; "
                         f"optimizers: {names}.")


def build_named(optimizers: Mapping[str, keras.optimizers.Optimizer],
                owned: Mapping[str, Sequence[str]], models: Mapping[str, keras.Model]) -> None:
    """Names each optimizer after its key and builds it on the variables of the models it
    updates (`owned`), in the current strategy's scope."""
    for name, model_names in owned.items():
        optimizers[name].name = name
        if not optimizers[name].built:
            # Keras 3 creates slots lazily; a compiled step under a strategy needs them now.
            optimizers[name].build(
                [v for model in model_names for v in models[model].trainable_variables])


class AdversarialModel(keras.Model):
    """A `keras.Model` whose fit step is one cycle of Gantry phases (see the module docstring).

    Args:
      models: the named sub-models the phases update and call (built, e.g. functional).
      phases: the ordered phases of one cycle.
      global_batch_size: real examples per update over all replicas.
      seed: the run's seed; each update's noise key is `update_seed(seed, cycle, phase, repeat)`.
      sample: ``sample(noise) -> outputs`` for `model(noise)`, `predict` and
        `ImageGridCallback`; defaults to ``models["generator"](noise, training=False)``.

    Create it, and the optimizers given to `compile`, inside `strategy.scope()` to train under a
    strategy. `cycle` (int64, saved with the weights) counts completed cycles.
    """

    def __init__(
        self,
        models: Mapping[str, keras.Model],
        phases: Sequence[phases_lib.Phase],
        *,
        global_batch_size: int,
        seed: int = 0,
        sample: Callable[[tf.Tensor], tf.Tensor] | None = None,
    ):
        super().__init__()
        phases = tuple(phases)
        phases_lib.validate_phases(phases, list(models))
        if global_batch_size < 1:
            raise ValueError(f"global_batch_size={global_batch_size} must be >= 1.")
        if sample is None and "generator" not in models:
            raise ValueError(f"No model is named 'generator' (models: {sorted(models)}); pass "
                             "sample=fn(noise) -> outputs.")
        *starts, self.batches_per_cycle = itertools.accumulate(
            (p.repeats if p.uses_data else 0 for p in phases), initial=0)
        if not self.batches_per_cycle:
            raise ValueError("No phase uses data; fit draws its cycles from the dataset, so at "
                             "least one phase needs uses_data=True.")
        self.models = dict(models)
        self.phases = phases
        # The element slot of each phase's first batch (see the data contract).
        self._first_slot = {phase.name: start for phase, start in zip(phases, starts)}
        self.global_batch_size = global_batch_size
        self.seed = seed
        self._sample = sample
        self.cycle = self.add_weight(name="cycle", shape=(), dtype="int64", initializer="zeros",
                                     trainable=False, aggregation="only_first_replica")
        self.phase_optimizers: dict[str, keras.optimizers.Optimizer] = {}
        self.learning_rate_scales: dict[str, tf.Variable] = {}
        self.trackers: dict[str, keras.metrics.Mean] = {}
        self._updates: dict[str, Callable] = {}
        self.built = True

    @classmethod
    def from_gantry_config(cls, config: Config, info) -> "AdversarialModel":
        """The `--setup` setup of `config` for dataset `info`, compiled with its own optimizers.

        Builds through `building.build_run`, as the train mode does, under the current strategy:
        call it inside `strategy.scope()`. Initial weights
        follow Keras's global seed: call `keras.utils.set_random_seed(config.seed)` first for
        run.py's initialisation. Call `compile` again to train with other optimizers.
        ConfigError for a `train_time`: `fit` ends by its epochs, and a rate decaying over the
        time would never move; and for an `init_from`, which the train mode loads when it starts
        a run (this model would silently start from fresh weights).
        """
        if config.train_time:
            raise ConfigError(
                f"--train_time={config.train_time} is the train mode's budget; model.fit ends by "
                "its epochs and steps_per_epoch (set train_cycles for a decaying rate's length): "
                "leave train_time empty.")
        if config.init_from:
            raise ConfigError(
                f"--init_from={config.init_from} is loaded by the train mode (run.py, "
                "trainers.api.train) when it starts a run; model.fit does not read it: leave "
                "init_from empty and copy the weights into model.models yourself (e.g. "
                "set_weights from trainers.api.load_generator(LOGDIR)).")
        config = registry.resolve(config)
        strategy = tf.distribute.get_strategy()
        built = building.build_run(registry.get(config.setup), config, info, strategy)
        with strategy.scope():
            model = cls(built.models, built.phases, global_batch_size=config.batch_size,
                        seed=config.seed,
                        sample=built.sampling.sample if built.sampling else None)
        model.compile(built.optimizers, learning_rate_scales=built.learning_rate_scales)
        return model

    def compile(
        self,
        optimizers: Mapping[str, keras.optimizers.Optimizer] | None = None,
        *,
        d_optimizer: keras.optimizers.Optimizer | None = None,
        g_optimizer: keras.optimizers.Optimizer | None = None,
        learning_rate_scales: Mapping[str, tf.Variable] | None = None,
        run_eagerly: bool = False,
        steps_per_execution: int = 1,
        jit_compile: bool = False,
    ) -> None:
        """Sets the phases' optimizers, keyed by optimizer name, and builds each on its variables.

        The names are `phases.phase_optimizer_names` of the phases: a phase's own name unless
        it sets `Phase.optimizers` (the lazy "penalty" phase uses "discriminator").
        `d_optimizer`/`g_optimizer` are shortcuts for "discriminator"/"generator".
        Each optimizer is renamed after its key (see `PhaseOptimizers`).
        `learning_rate_scales` are the variables that multiply scheduled learning rates
        (`protocol.Built.learning_rate_scales`): saved with the weights, and what
        `keras_callbacks.ReduceLROnPlateauAll` lowers. XLA is off by default, as in the trainer.
        """
        optimizers = with_shortcuts(optimizers, d_optimizer=d_optimizer, g_optimizer=g_optimizer)
        owned = phases_lib.optimizer_models(self.phases)
        check_optimizers(optimizers, self.phases, learning_rate_scales)
        super().compile(optimizer=None, run_eagerly=run_eagerly,
                        steps_per_execution=steps_per_execution, jit_compile=jit_compile)
        strategy = self.distribute_strategy
        with strategy.scope():
            build_named(optimizers, owned, self.models)
        self.phase_optimizers = {name: optimizers[name] for name in owned}
        self.learning_rate_scales = dict(learning_rate_scales or {})
        self.optimizer = PhaseOptimizers(self.phase_optimizers.values(), self.cycle)
        self.trackers = {f"{phase.name}/{key}": keras.metrics.Mean(name=f"{phase.name}/{key}")
                         for phase in self.phases
                         for key in reported_metrics(phase, optimizers)}
        self._updates = {
            phase.name: make_replica_update(
                phase, models=self.models, optimizers=optimizers,
                global_batch_size=self.global_batch_size,
                num_replicas=strategy.num_replicas_in_sync, inside_xla=jit_compile)
            for phase in self.phases}

    def fit(self, x: tf.data.Dataset | None = None, y: None = None, *args, **kwargs):
        """Keras's `fit` on a dataset of ordinary batches (the data contract in the module
        docstring); ValueError for anything else (arrays, `y`, a dataset of other batches)."""
        if y is not None or not isinstance(x, tf.data.Dataset):
            raise ValueError(
                f"fit takes a tf.data.Dataset of batches of {self.global_batch_size} examples "
                "(images, (images, labels) or dicts {'x': ..., 'label': ...}), and no y; got "
                f"x={type(x).__name__}{'' if y is None else ' and a y'}. Make one with "
                "tf.data.Dataset.from_tensor_slices((images, labels)).batch(batch_size).")
        return super().fit(self.cycle_batches(x), None, *args, **kwargs)

    def cycle_batches(self, batches: tf.data.Dataset) -> tf.data.Dataset:
        """`batches` (the data contract) as fit's steps: examples {"x"[, "label"]} stacked
        [global batch, batches_per_cycle, ...], batch t of the stream in slot t % S of step
        t // S. Incomplete batches and cycles are dropped, so every update sees a full global
        batch. Repeat (and shuffle) the data first, and give fit `steps_per_epoch`, to run past
        one pass."""
        # map calls with a tuple element's members as arguments.
        batches = batches.map(lambda *parts: as_example_batch(parts[0] if len(parts) == 1 else parts))
        rows = tf.nest.flatten(batches.element_spec)[0].shape[0]
        if rows is not None and rows != self.global_batch_size:
            raise ValueError(f"fit: the dataset's batches hold {rows} examples, but the model "
                             f"trains on global_batch_size={self.global_batch_size} (config."
                             f"batch_size); batch the data by {self.global_batch_size}.")

        def batch_first(tensor):
            return tf.transpose(tensor, [1, 0, *range(2, tensor.shape.rank)])

        return (batches.rebatch(self.global_batch_size, drop_remainder=True)
                .batch(self.batches_per_cycle, drop_remainder=True)
                .map(lambda element: tf.nest.map_structure(batch_first, element)))

    @property
    def latent_shape(self) -> tuple[int, ...]:
        """The shape of one latent vector, read from the generator's (first) input."""
        if "generator" not in self.models:
            raise ValueError(f"No model is named 'generator' (models: {sorted(self.models)}), "
                             "whose input gives the latent shape; pass noise explicitly.")
        shape = self.models["generator"].input_shape
        return tuple((shape[0] if isinstance(shape, list) else shape)[1:])

    @property
    def metrics(self) -> list[keras.metrics.Metric]:
        return list(self.trackers.values())

    def sample(self, noise: tf.Tensor) -> tf.Tensor:
        """Outputs (images or points) for a batch of latent vectors, in inference mode."""
        if self._sample is None:
            return self.models["generator"](noise, training=False)
        return self._sample(noise)

    def call(self, noise: tf.Tensor) -> tf.Tensor:
        return self.sample(noise)

    def train_step(self, data: Any) -> dict[str, tf.Tensor]:
        """One cycle (`cycle.run_cycle`), in replica context; returns the epoch's running means."""
        self._check_layout(data)
        run_cycle(self.phases, tf.convert_to_tensor(self.cycle), self.seed, self._update,
                  run_if=replica_cond, args=(data,))
        self.cycle.assign_add(1)
        return {name: tracker.result() for name, tracker in self.trackers.items()}

    def _update(self, phase: phases_lib.Phase, repeat: int, cycle: tf.Tensor, seed: tf.Tensor,
                data: Any) -> None:
        """One update of `phase` on its slot of the element; its metrics join the trackers."""
        context = tf.distribute.get_replica_context()
        real = self._slot(data, self._first_slot[phase.name] + repeat) if phase.uses_data else None
        result = self._updates[phase.name](real, seed, cycle)
        replicas = float(context.num_replicas_in_sync)
        for key, share in result.shares.items():
            self.trackers[f"{phase.name}/{key}"].update_state(share * replicas)
        for key, value in result.replicated.items():
            self.trackers[f"{phase.name}/{key}"].update_state(value)
        if phase.after_update is not None:
            context.merge_call(lambda _: phase.after_update(self.models, cycle))

    @staticmethod
    def _slot(data: Any, slot: int) -> Any:
        return tf.nest.map_structure(lambda tensor: tensor[:, slot], data)

    def _check_layout(self, data: Any) -> None:
        replica_batch = (self.global_batch_size
                         // tf.distribute.get_replica_context().num_replicas_in_sync)
        expected = [replica_batch, self.batches_per_cycle]
        for tensor in tf.nest.flatten(data):
            if tensor.shape.rank is None or tensor.shape.rank < 2 or tensor.shape[:2] != expected:
                raise ValueError(
                    f"fit expects every dataset element to hold one cycle's "
                    f"{self.batches_per_cycle} real batches on axis 1, shape "
                    f"[{self.global_batch_size}, {self.batches_per_cycle}, ...] ({replica_batch} "
                    f"rows per replica); got {tensor.shape}. Give fit a dataset of batches "
                    "(`cycle_batches` stacks them).")

    def _own_state(self) -> list:
        return [self.cycle, *self.learning_rate_scales.values()]

    def save_own_variables(self, store) -> None:
        """Saves the cycle counter and the learning-rate scales (sub-models save themselves)."""
        for i, variable in enumerate(self._own_state()):
            store[str(i)] = np.asarray(variable)

    def load_own_variables(self, store) -> None:
        state = self._own_state()
        if len(store.keys()) != len(state):
            raise ValueError(
                f"The weights file holds {len(store.keys())} model-level values but this model "
                f"has {len(state)} (the cycle and {len(state) - 1} learning-rate scales); compile "
                "it as the saved model was compiled before loading.")
        for i, variable in enumerate(state):
            variable.assign(np.asarray(store[str(i)]))
