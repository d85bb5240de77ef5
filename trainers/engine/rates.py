"""Per-variable learning rates: a factor on the scheduled rate of each variable an optimizer updates.

Adam and RMSprop divide a gradient by a running estimate of its own size, so scaling gradients
does not change their steps: a rate per group of variables has to scale the rate itself.
`PerVariableRates` does that in `update_step`, which Keras calls once per variable with the
scheduled rate. Adam's and RMSprop's update of a variable reads only its own slots, the step
count and the rate, so each variable moves exactly as under an optimizer of its own at rate x
factor, while the model keeps ONE optimizer: one set of slots and checkpoint key, one step count
for the schedule, one loss scale and one clipping norm, whatever the groups. Factor 0 is not a
rate: such variables are frozen before the optimizer is built (`freeze`), so nothing updates
them and no slots exist for them.

Variables are named "<model>/<variable.path>" ("generator/seed/kernel"): a functional Keras
model's paths do not start with the model's name, and two models may hold layers of one name.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Callable, Mapping, Sequence

import keras


def variable_name(model: str, variable: keras.Variable) -> str:
    """The name `RateFactors` patterns are matched against: "<model>/<variable.path>" (the path
    alone when it already starts with "<model>/")."""
    path = variable.path
    return path if path.startswith(f"{model}/") else f"{model}/{path}"


@dataclasses.dataclass(frozen=True)
class RateFactors:
    """Ordered (regex, factor) rules over variable names (`variable_name`): the first rule whose
    regex is found in a name (`re.search`) gives its factor; a name no rule matches keeps 1."""

    rules: tuple[tuple[str, float], ...] = ()

    def factor(self, name: str) -> float:
        for pattern, factor in self.rules:
            if re.search(pattern, name):
                return factor
        return 1.0

    def unmatched(self, names: Sequence[str]) -> list[str]:
        """The patterns found in none of `names` (each a mistake: it would change nothing)."""
        return [pattern for pattern, _ in self.rules if not any(re.search(pattern, n) for n in names)]

    def lookup(self, models: Mapping[str, keras.Model]) -> Callable[[keras.Variable], float]:
        """``factor_of(variable)`` over the trainable variables of `models` (keyed by name)."""
        by_id = {id(v): self.factor(variable_name(name, v))
                 for name, model in models.items() for v in model.trainable_variables}
        return lambda variable: by_id[id(variable)]


def freeze(factors: RateFactors, models: Mapping[str, keras.Model]) -> None:
    """Marks the variables of `models` whose factor is 0 non-trainable, so they leave the models'
    `trainable_variables`: no phase differentiates or updates them, no optimizer holds slots."""
    for name, model in models.items():
        for variable in model.trainable_variables:
            if factors.factor(variable_name(name, variable)) == 0:
                variable.trainable = False


class PerVariableRates:
    """Mixin before a Keras optimizer class whose `update_step(gradient, variable, rate)`
    updates one variable: that variable's rate is multiplied by ``factor_of(variable)``.

    The factors are taken when the optimizer is built and enter the step as constants when it is
    traced (no multiplication for factor 1); they live in no variable and no checkpoint, so a
    resumed run may change them like the learning rates.
    """

    def __init__(self, *args, factor_of: Callable[[keras.Variable], float], **kwargs):
        super().__init__(*args, **kwargs)
        self._factor_of = factor_of
        self._rate_factors: tuple[float, ...] = ()

    def build(self, variables):
        if not self.built:  # Keras builds an optimizer once; later calls change nothing
            self._rate_factors = tuple(self._factor_of(v) for v in variables)
        super().build(variables)

    def update_step(self, gradient, variable, learning_rate):
        # Under a distribution strategy `variable` is one replica's copy; the optimizer's index
        # maps it to the variable it was built on.
        factor = self._rate_factors[self._get_variable_index(variable)]
        super().update_step(gradient, variable, learning_rate if factor == 1 else learning_rate * factor)


class Adam(PerVariableRates, keras.optimizers.Adam):
    """Adam with a learning-rate factor per variable."""


class RMSprop(PerVariableRates, keras.optimizers.RMSprop):
    """RMSprop with a learning-rate factor per variable."""
