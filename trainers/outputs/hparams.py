"""TensorBoard HParams output: a run's hyper-parameters and the metric columns to compare runs by.

Written with the plugin's own API (`tensorboard.plugins.hparams.api`) through the DEFAULT
summary writer, like every writer in `summaries` (silent without one, so a worker that must not
log runs with a no-op writer). Two summaries make a run one row of the dashboard:

- the experiment (`hp.hparams_config`): every hparam column with its type and values, and the
  metric columns. TensorBoard reads it from any one run under its `--logdir`, so every run
  writes the same one (the caller passes the same specs to all);
- the session (`hp.hparams`): this run's values. TensorBoard keeps the first summary of a tag
  in a run directory, so the values written when a run starts stay its values when it resumes.

A metric is the last value of a scalar tag in the session's directory (`group` ""), or in a
subdirectory of it (`group` = its name). The readers parse the plugin's protos back, for tests.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Mapping, Sequence

from tensorboard.plugins.hparams import api as hp
from tensorboard.plugins.hparams import metadata

from trainers.config.hparams import HParamSpec
from trainers.outputs import summaries

# "any number": TensorBoard types a column by its domain; a number's range is not known ahead.
ANY_NUMBER = hp.RealInterval(-sys.float_info.max, sys.float_info.max)


@dataclasses.dataclass(frozen=True)
class MetricColumn:
    """A metric column: scalar `tag` in the run's directory, or in its subdirectory `group`."""

    tag: str
    group: str = ""
    display_name: str = ""
    description: str = ""


@dataclasses.dataclass(frozen=True)
class HParamsRecord:
    """What a run directory holds for the dashboard (see `read_hparams`)."""

    columns: tuple[str, ...]                     # hparam column names of the experiment
    metrics: tuple[tuple[str, str], ...]         # (group, tag) of each metric column
    values: dict[str, bool | float | str]        # the session's hparam values


def write_experiment(specs: Sequence[HParamSpec], metrics: Sequence[MetricColumn]) -> None:
    """The dashboard's columns: `specs` as hparams (choices and bools as discrete domains,
    numbers as an interval, free text without a domain), `metrics` as metrics."""
    hp.hparams_config(
        hparams=[hp.HParam(spec.name, _domain(spec), description=spec.description)
                 for spec in specs],
        metrics=[hp.Metric(column.tag, group=column.group or None,
                           display_name=column.display_name or None,
                           description=column.description or None) for column in metrics])


def write_session(values: Mapping[str, bool | int | float | str]) -> None:
    """This run's hparam values (its row; runs with equal values form one session group)."""
    hp.hparams(dict(values))


def read_hparams(logdir: str) -> HParamsRecord:
    """The experiment and the session written in `logdir` itself (not its subdirectories), as
    TensorBoard reads them: the first summary of each tag. ValueError if either is missing."""
    found = {}
    for _, value in summaries.summary_values(logdir, recursive=False):
        if value.metadata.plugin_data.plugin_name == metadata.PLUGIN_NAME:
            found.setdefault(value.tag, value.metadata.plugin_data.content)
    missing = [tag for tag in (metadata.EXPERIMENT_TAG, metadata.SESSION_START_INFO_TAG)
               if tag not in found]
    if missing:
        raise ValueError(f"no HParams {missing} under {logdir!r}; hparams tags found: {sorted(found)}")
    experiment = metadata.parse_experiment_plugin_data(found[metadata.EXPERIMENT_TAG])
    session = metadata.parse_session_start_info_plugin_data(found[metadata.SESSION_START_INFO_TAG])
    return HParamsRecord(
        columns=tuple(info.name for info in experiment.hparam_infos),
        metrics=tuple((info.name.group, info.name.tag) for info in experiment.metric_infos),
        values={name: _plain(value) for name, value in session.hparams.items()})


def _domain(spec: HParamSpec) -> hp.Domain | None:
    if spec.kind is bool:
        return hp.Discrete([False, True])
    if spec.choices:
        return hp.Discrete(list(spec.choices))
    return ANY_NUMBER if spec.kind is float else None


def _plain(value) -> bool | float | str:
    return getattr(value, value.WhichOneof("kind"))
