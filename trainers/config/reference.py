"""The flag reference (docs/flags.md), rendered from the flag declarations: one table per
owner, in declaration order, with each flag's type, default, choices and facts."""

from __future__ import annotations

from typing import Iterable, Mapping

from trainers.config.flags import Flag, read_by

HEADER = """# Flags

Every flag of `run.py` (and of `api.config(**flags)`), grouped by the part of Gantry that owns
(reads) it. Every setup reads the common groups:
{common}. The others are read only by the setups that name them; a training run that gives a
flag of another group is refused. This page is generated from the flag declarations; regenerate
it with
`python -c "from trainers import api; print(api.flag_reference(), end='')" > docs/flags.md`.
Facts: *preset*, filled by the setup's preset when not given; *resume*, must keep its value
when a run resumes; *path*, a filesystem path checked before any work; *not an hparam*, not a
column of TensorBoard's HParams dashboard.
"""


def markdown(flags: Iterable[Flag], runtime_choices: Mapping[str, tuple[str, ...]]) -> str:
    """The reference page; `runtime_choices` lists values known only at run time (setups)."""
    owners: dict[str, list[Flag]] = {}
    for flag in flags:
        owners.setdefault(flag.owner, []).append(flag)
    common = dict.fromkeys(flag.owner for flag in read_by(()).values())
    sections = [HEADER.format(common=", ".join(common))]
    for owner, owned in owners.items():
        rows = ["| flag | type | default | facts | what it does |", "| --- | --- | --- | --- | --- |"]
        rows += [_row(flag, runtime_choices.get(flag.name, ())) for flag in owned]
        sections.append(f"## {owner}\n\n" + "\n".join(rows) + "\n")
    return "\n".join(sections)


def _row(flag: Flag, runtime_choices: tuple[str, ...]) -> str:
    choices = flag.choices or runtime_choices
    facts = [fact for fact, holds in (("preset", flag.preset), ("resume", flag.fixed_on_resume),
                                      ("path", bool(flag.path)),
                                      ("not an hparam", not flag.is_hparam)) if holds]
    if flag.renamed_from:
        facts.append("was " + ", ".join(f"`--{old}`" for old in flag.renamed_from))
    if flag.takes_over:
        facts.append("takes " + ", ".join(f"`--{old}`" for old in flag.takes_over)
                     + " in its setups")
    default = "(preset)" if flag.preset else f"`{flag.default!r}`"
    text = flag.help + (f" One of: {', '.join(choices)}." if choices else "")
    return (f"| `--{flag.name}` | {flag.type.__name__} | {default} | {', '.join(facts)} | "
            f"{text.replace('|', '&#124;')} |")
