"""The documents' runnable blocks run, and their relative links (and #headings) resolve.

A fenced block of README.md, BUILD.md or docs/*.md is *runnable* when the line right before its fence is
a test marker, an HTML comment (invisible on a rendered page):

    <!-- test -->                                  run the block as written
    <!-- test: "OLD" -> "NEW", "OLD2" -> "NEW2" -->  first replace each OLD by its NEW

Each pair is two JSON strings. Substitutions are the one way a block is made cheap enough for
the suite (`"--train_cycles=2000" -> "--train_cycles=2 {TINY}"`); an OLD that no longer occurs
in its block fails the test, so a block and its marker cannot drift apart. In a NEW, `{ROOT}`
is the checkout's path and `{TINY}` the small-model flags of `tests.cli.TINY`. Every other
block is illustrative and never run.

A document's runnable blocks run in document order in one temporary working directory, as a
reader would type them, so a later block may use what an earlier one made (a run to sample
from). A ```sh block holds `.venv/bin/python run.py FLAGS` commands only (a trailing backslash
continues a line, `#` starts a comment; substitute any other line away with `-> ""`): each runs
through `tests.cli.run` (a warm-started `run.py`) and must exit 0. A ```python block is
exec'd in the test process.
"""

import dataclasses
import json
import pathlib
import re
import shlex

import pytest

from tests import cli

ROOT = pathlib.Path(cli.ROOT)
DOCUMENTS = sorted([ROOT / "README.md", ROOT / "BUILD.md", *(ROOT / "docs").glob("*.md")])
MARKER = re.compile(r"^<!-- test(?::(?P<pairs>.*?))? -->$", re.S)
PAIR = re.compile(r'\s*("(?:[^"\\]|\\.)*")\s*->\s*("(?:[^"\\]|\\.)*")\s*(?:,|$)')
FENCE_OPENING = re.compile(r"^```\S*\s*$")
RUN_PY = ("python", "run.py")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


@dataclasses.dataclass(frozen=True)
class Block:
    document: pathlib.Path
    line: int
    language: str
    text: str  # with the substitutions applied
    unmatched: tuple[str, ...]  # substitutions whose OLD is not in the block

    @property
    def where(self) -> str:
        return f"{self.document.name}:{self.line}"


def substitutions(pairs: str) -> list[tuple[str, str]]:
    """The (OLD, NEW) pairs of a marker, `{ROOT}` and `{TINY}` expanded in NEW."""
    found, position, pairs = [], 0, pairs.strip()
    while position < len(pairs):
        match = PAIR.match(pairs, position)
        assert match, f"unreadable test marker at {pairs[position:]!r}: write \"OLD\" -> \"NEW\", ..."
        old, new = json.loads(match.group(1)), json.loads(match.group(2))
        found.append((old, new.replace("{ROOT}", str(ROOT)).replace("{TINY}", " ".join(cli.TINY))))
        position = match.end()
    return found


def runnable_blocks(document: pathlib.Path) -> list[Block]:
    """The blocks of `document` with a test marker before them, in document order (a marker
    inside a fenced block is text, as in docs/README.md)."""
    lines, blocks, index, fenced = document.read_text().splitlines(keepends=True), [], 0, False
    while index < len(lines):
        if lines[index].startswith("```"):
            fenced = not fenced
        elif not fenced and lines[index].startswith("<!-- test"):
            where, start = f"{document.name}:{index + 1}", index
            while not lines[index].rstrip().endswith("-->") and index + 1 < len(lines):
                index += 1
            parsed = MARKER.match("".join(lines[start:index + 1]).strip())
            assert parsed, f"{where}: a test marker is `<!-- test -->` or `<!-- test: \"OLD\" -> \"NEW\" -->`"
            assert index + 1 < len(lines) and FENCE_OPENING.match(lines[index + 1]), (
                f"{where}: a test marker must sit on the line right before a fence")
            language, index = lines[index + 1][3:].strip(), index + 2
            body = []
            while index < len(lines) and not lines[index].startswith("```"):
                body.append(lines[index])
                index += 1
            blocks.append(block(document, start + 1, language, "".join(body), parsed.group("pairs") or ""))
        index += 1
    return blocks


def block(document: pathlib.Path, line: int, language: str, body: str, pairs: str) -> Block:
    """A runnable block with its marker's substitutions applied, noting those that miss."""
    unmatched = []
    for old, new in substitutions(pairs):
        if old not in body:
            unmatched.append(old)
        body = body.replace(old, new)
    return Block(document, line, language, body, tuple(unmatched))


def commands(block: Block) -> list[list[str]]:
    """The run.py flags of each command of a shell block; any other command fails the test."""
    found = []
    for line in block.text.replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        if not words:
            continue
        assert len(words) >= 2 and words[0].endswith(RUN_PY[0]) and words[1] == RUN_PY[1], (
            f"{block.where}: {line.strip()!r} is not a `.venv/bin/python run.py` command; "
            "substitute it away in the test marker, or leave the block unmarked")
        found.append(words[2:])
    return found


def run_block(block: Block, directory: pathlib.Path, monkeypatch) -> None:
    assert not block.unmatched, (
        f"{block.where}: the test marker replaces {list(block.unmatched)}, which the block no "
        "longer contains: update the marker to the block")
    if block.language == "sh":
        for flags in commands(block):
            result = cli.run(*flags, cwd=str(directory), timeout=600)
            assert result.returncode == 0, (
                f"{block.where}: run.py {shlex.join(flags)}\n{result.stderr[-3000:]}")
    elif block.language == "python":
        monkeypatch.chdir(directory)
        exec(compile(block.text, block.where, "exec"), {"__name__": "__docs__"})
    else:
        pytest.fail(f"{block.where}: only sh and python blocks can be runnable, not {block.language!r}")


RUNNABLE = [document for document in DOCUMENTS if runnable_blocks(document)]


@pytest.mark.parametrize("document", RUNNABLE, ids=lambda path: str(path.relative_to(ROOT)))
def test_runnable_blocks_run(document, tmp_path, monkeypatch):
    for block in runnable_blocks(document):
        run_block(block, tmp_path, monkeypatch)


def test_some_blocks_are_runnable():
    assert ROOT / "README.md" in RUNNABLE and len(RUNNABLE) >= 2


@pytest.mark.parametrize("document", RUNNABLE, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_marker_applies(document):
    """Without running anything: each substitution still finds its text, each block is sh or
    python, and each sh line is a run.py command."""
    for block in runnable_blocks(document):
        assert not block.unmatched, f"{block.where}: {list(block.unmatched)} no longer in the block"
        assert block.language in ("sh", "python"), f"{block.where}: {block.language!r}"
        if block.language == "sh":
            assert commands(block)


def anchors(document: pathlib.Path) -> set[str]:
    """The `#fragment`s a rendered page offers: its headings as GitHub turns them into ids."""
    return {re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
            for heading in re.findall(r"^#+ (.*)$", document.read_text(), re.M)}


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: str(path.relative_to(ROOT)))
def test_relative_links_resolve(document):
    broken = []
    for target in LINK.findall(document.read_text()):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, fragment = target.partition("#")
        linked = document.parent / path if path else document
        if not linked.exists() or (fragment and linked.suffix == ".md" and fragment not in anchors(linked)):
            broken.append(target)
    assert not broken, f"{document.relative_to(ROOT)} links to missing files or headings: {broken}"


def test_the_marker_mechanism(tmp_path):
    document = tmp_path / "doc.md"
    document.write_text('Text.\n\n<!-- test: "2000" -> "4", "gone" -> "x" -->\n```python\nn = 2000\n```\n\n'
                        "```sh\nmake run\n```\n")
    (block,) = runnable_blocks(document)
    assert (block.language, block.text, block.unmatched) == ("python", "n = 4\n", ("gone",))
    document.write_text('```text\n<!-- test -->\n```\n<!-- test:\n "a" -> "b" -->\n```sh\na\n```\n')
    assert [(block.line, block.text) for block in runnable_blocks(document)] == [(4, "b\n")]
    assert substitutions(' "a" -> "{ROOT}/b" ') == [("a", f"{ROOT}/b")]
    with pytest.raises(AssertionError, match="right before a fence"):
        document.write_text("<!-- test -->\n\n```sh\nx\n```\n")
        runnable_blocks(document)
    shell = Block(document, 1, "sh", ".venv/bin/python run.py --a=1 \\\n  --b='x y'  # c\nmake tfjs\n", ())
    with pytest.raises(AssertionError, match="'make tfjs' is not a `.venv/bin/python run.py` command"):
        commands(shell)
    without = dataclasses.replace(shell, text=shell.text.replace("make tfjs", ""))
    assert commands(without) == [["--a=1", "--b=x y"]]
    document.write_text("# Set-up and `use`\n[a](#set-up-and-use) [b](doc.md#nowhere)\n")
    assert anchors(document) == {"set-up-and-use"}
