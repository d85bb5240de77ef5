"""The package layout as static checks: the import graph, its layers, and which code may know a
setup's name or a dataset's kind. Pure Python: imports are read from the sources with `ast`,
nothing is imported but the setup registry (for the setup names), so these run in a second.

The layers, bottom to top: trainers.config (flags), trainers.engine (training engine),
trainers.outputs (images, summaries, progress, actions), trainers.evaluation, trainers.setups
(the registry and one module per setup family), trainers.fit (the Keras fit path),
trainers.modes (train, sample, evaluate, export, plot, train_evaluator), trainers.api (the
Python API), then run.py. A module
imports only its own layer and the ones below. `gan/` and `datasets/` stand beside them:
`gan` never imports trainers, `datasets` imports neither. Imports inside functions count: a
cycle hidden in a function body is still a cycle.

Each failure lists the offending lines as path:line.
"""

import ast
import dataclasses
import pathlib
import re

import pytest

from trainers.setups import registry

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = ("gan", "datasets", "trainers")
LAYERS = ("config", "engine", "outputs", "evaluation", "setups", "fit", "modes", "api")
RUN = "run"  # run.py, above every layer
TENSORFLOW = ("tensorflow", "keras", "tf_keras")
# The registry imports no TensorFlow: every name a setup serves, with none listed here.
SETUP_NAMES = registry.names()
# Also a --penalty value: as a string it is a setup name only where it is compared with `setup`.
PENALTY_NAMES = ("r1",)
# The kinds of data, and "points", a toy's kind before it was called "toy".
KIND_VALUES = ("toy", "image", "points")
# The one place that names the kinds (datasets) and the one that maps them (setups).
KIND_MODULES = ("datasets.registry", "trainers.setups.kinds")
COMPARISONS = (ast.Eq, ast.NotEq, ast.In, ast.NotIn)
# Imports TensorFlow only inside the functions that serve a path with a scheme (gs://), so the
# flags of a local run are still checked without it.
TENSORFLOW_FOR_REMOTE_PATHS = ("datasets.files",)


@dataclasses.dataclass(frozen=True)
class Module:
    name: str  # dotted, "run" for run.py
    path: pathlib.Path

    @property
    def where(self) -> str:
        return str(self.path.relative_to(ROOT))

    def tree(self) -> ast.Module:
        return ast.parse(self.path.read_text(), filename=str(self.path))


@dataclasses.dataclass(frozen=True)
class Import:
    source: Module
    target: str  # a project module's dotted name, or the imported name as written
    line: int

    @property
    def at(self) -> str:
        return f"{self.source.where}:{self.line}"


def project_modules() -> dict[str, Module]:
    """Every module of gan/, datasets/, trainers/ and run.py (benchmarks/ and tests/ are not
    part of the product), by dotted name; a package by its own name."""
    modules = {RUN: Module(RUN, ROOT / "run.py")}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join(parts)] = Module(".".join(parts), path)
    return modules


MODULES = project_modules()


def imports_of(module: Module, known=MODULES) -> list[Import]:
    """The imports anywhere in `module` (top level, functions, conditionals). `from P import x`
    names the module P.x when that is a module of `known`, else P."""
    package = module.name if module.path.name == "__init__.py" else module.name.rpartition(".")[0]
    found = []
    for node in ast.walk(module.tree()):
        if isinstance(node, ast.Import):
            found += [Import(module, alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parent = ".".join(parts[:len(parts) - node.level + 1])
                base = f"{parent}.{base}" if base else parent
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                found.append(Import(module, candidate if candidate in known else base, node.lineno))
    return found


IMPORTS = {name: imports_of(module) for name, module in MODULES.items()}


def within(name: str, *prefixes: str) -> bool:
    """True when the dotted `name` is one of `prefixes` or inside one of them."""
    return any(name == prefix or name.startswith(prefix + ".") for prefix in prefixes)


def layer_of(name: str) -> int | None:
    """The index of the module's layer (run.py above all), None outside the layers."""
    if name == RUN:
        return len(LAYERS)
    parts = name.split(".")
    if parts[0] == "trainers" and len(parts) > 1 and parts[1] in LAYERS:
        return LAYERS.index(parts[1])
    return None


def report(offenders) -> str:
    return "\n" + "\n".join(sorted(set(offenders), key=_path_order))


def _path_order(line: str):
    where, _, rest = line.partition(": ")
    path, _, number = where.rpartition(":")
    return (path, int(number) if number.isdigit() else 0, rest)


# The import graph ----------------------------------------------------------------------------

def tangles(edges: dict[str, dict[str, Import]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm): the
    modules of one component all import each other, directly or not."""
    index, low, stack, on_stack, components = {}, {}, [], set(), []

    def connect(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in edges.get(node, {}):
            if successor not in index:
                connect(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            components.append(component)

    for node in sorted(edges):
        if node not in index:
            connect(node)
    return [component for component in components if len(component) > 1]


def shortest_cycle(component: set[str], edges: dict[str, dict[str, Import]]) -> list[Import]:
    """The import statements of a shortest cycle through the component's first module."""
    start = min(component)
    previous, frontier = {}, [start]
    while start not in previous:
        following = []
        for node in frontier:
            for successor in sorted(edges[node]):
                if successor in component and successor not in previous:
                    previous[successor] = node
                    following.append(successor)
        frontier = following
    path, node = [], start
    while True:
        path.append(edges[previous[node]][node])
        node = previous[node]
        if node == start:
            return path[::-1]


def project_edges(imports=IMPORTS) -> dict[str, dict[str, Import]]:
    """module -> {imported project module: its first import statement}."""
    edges = {}
    for name, found in imports.items():
        edges[name] = {}
        for statement in sorted(found, key=lambda statement: statement.line):
            if statement.target in MODULES and statement.target != name:
                edges[name].setdefault(statement.target, statement)
    return edges


def test_the_import_graph_has_no_cycle():
    edges = project_edges()
    lines = []
    for component in tangles(edges):
        cycle = shortest_cycle(component, edges)
        lines.append(f"{len(component)} modules import each other: {', '.join(sorted(component))}; "
                     "for one: " + " -> ".join([cycle[0].source.name]
                                               + [f"{i.target} ({i.at})" for i in cycle]))
    assert not lines, "\n" + "\n".join(lines)


def test_the_cycle_finder_reports_a_cycle_and_only_cycles():
    """On a made-up graph: a -> b -> c -> a, c -> d, and d on no cycle."""
    def edge(source, target):
        return Import(Module(source, ROOT / f"{source}.py"), target, 1)

    edges = {"a": {"b": edge("a", "b")}, "b": {"c": edge("b", "c")},
             "c": {"a": edge("c", "a"), "d": edge("c", "d")}, "d": {}}
    [component] = tangles(edges)
    assert component == {"a", "b", "c"}
    cycle = shortest_cycle(component, edges)
    assert [(i.source.name, i.target) for i in cycle] == [("a", "b"), ("b", "c"), ("c", "a")]
    del edges["c"]["a"]
    assert tangles(edges) == []


# Layers --------------------------------------------------------------------------------------

def test_every_trainers_module_sits_in_a_layer():
    offenders = [f"{module.where}:1: {name} is in none of trainers.{{{', '.join(LAYERS)}}}"
                 for name, module in MODULES.items()
                 if within(name, "trainers") and name != "trainers" and layer_of(name) is None]
    assert not offenders, report(offenders)


def test_imports_only_go_down_the_layers():
    offenders = []
    for name, found in IMPORTS.items():
        for statement in found:
            source, target = layer_of(name), layer_of(statement.target)
            if source is not None and target is not None and target > source:
                offenders.append(f"{statement.at}: {name} imports {statement.target}, a higher layer")
    assert not offenders, report(offenders)


def test_the_engine_knows_no_setup_mode_fit_output_evaluation_or_gan():
    forbidden = ("trainers.setups", "trainers.modes", "trainers.fit", "trainers.outputs",
                 "trainers.evaluation", "gan")
    offenders = [f"{statement.at}: imports {statement.target}"
                 for name, found in IMPORTS.items() if within(name, "trainers.engine")
                 for statement in found if within(statement.target, *forbidden)]
    assert not offenders, report(offenders)


def _imports_framework(module: str) -> bool:
    """Whether `module` imports TensorFlow or Keras anywhere, or for the modules of
    TENSORFLOW_FOR_REMOTE_PATHS, at their top level."""
    top_level = {node.lineno for node in MODULES[module].tree().body
                 if isinstance(node, (ast.Import, ast.ImportFrom))}
    return any(within(i.target, *TENSORFLOW) for i in IMPORTS[module]
               if module not in TENSORFLOW_FOR_REMOTE_PATHS or i.line in top_level)


def test_config_is_pure_python():
    """trainers.config imports nothing from trainers outside it, and no TensorFlow or Keras,
    directly or through a project module it imports (one chain is shown per import)."""
    edges = project_edges()
    offenders = []
    for name, found in IMPORTS.items():
        if not within(name, "trainers.config"):
            continue
        offenders += [f"{statement.at}: imports {statement.target}" for statement in found
                      if within(statement.target, "trainers", *TENSORFLOW)
                      and not within(statement.target, "trainers.config")]
        for target, statement in edges[name].items():
            chain = _chain_to(target, _imports_framework, edges)
            if chain and not within(target, "trainers"):
                framework = next(i for i in IMPORTS[chain[-1]] if within(i.target, *TENSORFLOW))
                offenders.append(f"{statement.at}: imports {' -> '.join(chain)}, which imports "
                                 f"{framework.target} at {framework.at}")
    assert not offenders, report(offenders)


def _chain_to(start: str, wanted, edges) -> list[str] | None:
    """A shortest import chain from `start` to a module for which `wanted(module)` holds."""
    previous, frontier = {start: None}, [start]
    while frontier:
        following = []
        for node in frontier:
            if wanted(node):
                chain = [node]
                while previous[chain[-1]] is not None:
                    chain.append(previous[chain[-1]])
                return chain[::-1]
            for successor in sorted(edges[node]):
                if successor not in previous:
                    previous[successor] = node
                    following.append(successor)
        frontier = following
    return None


@pytest.mark.parametrize("package, forbidden", [("gan", ("trainers", RUN)),
                                                ("datasets", ("gan", "trainers", RUN))])
def test_building_blocks_import_no_trainer(package, forbidden):
    offenders = [f"{statement.at}: imports {statement.target}"
                 for name, found in IMPORTS.items() if within(name, package)
                 for statement in found if within(statement.target, *forbidden)]
    assert not offenders, report(offenders)


# What only setups may know -------------------------------------------------------------------

def _is_named(node: ast.AST, *names: str) -> bool:
    """`name` or `anything.name`."""
    return (isinstance(node, ast.Name) and node.id in names) or (
        isinstance(node, ast.Attribute) and node.attr in names)


def _strings(node: ast.AST) -> list[str]:
    """A string constant, or the string constants of a tuple, list or set display."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [value for element in node.elts for value in _strings(element)]
    return []


def _comparisons(tree: ast.AST, subject, values):
    """(line, strings) of each ==, !=, in or not in between an operand that `subject` accepts
    and string constants of which at least one is in `values` (all strings when `values` is
    None)."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare) or not any(isinstance(op, COMPARISONS) for op in node.ops):
            continue
        operands = [node.left, *node.comparators]
        if not any(subject(operand) for operand in operands):
            continue
        strings = [value for operand in operands for value in _strings(operand)]
        if strings and (values is None or set(strings) & set(values)):
            yield node.lineno, strings


def _flag_defaults(tree: ast.AST, *names: str) -> set[int]:
    """ids of the default (third argument) of a `Flag(NAME, type, default, ...)` declaration of
    one of `names`: the --setup flag's default must name some setup, and the flags sit below the
    setups; --arch's "dcgan" is a network family spelled like a setup."""
    return {id(node.args[2]) for node in ast.walk(tree)
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Flag"
            and len(node.args) > 2 and isinstance(node.args[0], ast.Constant)
            and node.args[0].value in names}


def test_only_setups_know_setup_names():
    """No setup name as a string, and no comparison of `setup` with strings, in trainers/ outside
    trainers/setups/: modes and the engine ask the registry instead."""
    offenders = []
    for name, module in MODULES.items():
        if not within(name, "trainers") or within(name, "trainers.setups"):
            continue
        tree = module.tree()
        allowed = _flag_defaults(tree, "setup", "arch")
        names = set(SETUP_NAMES) - set(PENALTY_NAMES)
        compared = {}
        for line, strings in _comparisons(tree, lambda node: _is_named(node, "setup"), None):
            compared.setdefault(line, []).extend(strings)
        offenders += [f"{module.where}:{line}: compares setup with {', '.join(map(repr, strings))}"
                      for line, strings in compared.items()]
        offenders += [f"{module.where}:{node.lineno}: the setup name {node.value!r}"
                      for node in ast.walk(tree)
                      if isinstance(node, ast.Constant) and node.value in names
                      and id(node) not in allowed and node.lineno not in compared]
    assert not offenders, report(offenders)


def test_only_the_kinds_map_tells_toys_from_images():
    """No comparison of a dataset's kind with "toy" or "image" outside the module that names the
    kinds and the one that maps each to its class (`kinds.get`): a setup asks its kind's class
    what its data needs."""
    offenders = []
    for name, module in MODULES.items():
        if name in KIND_MODULES:
            continue
        offenders += [f"{module.where}:{line}: compares kind with {', '.join(map(repr, strings))}"
                      for line, strings in _comparisons(
                          module.tree(), lambda node: _is_named(node, "kind", "_kind"), KIND_VALUES)]
    assert not offenders, report(offenders)


# Setups --------------------------------------------------------------------------------------

def setup_modules() -> dict[str, str]:
    """The module of each registered setup's class -> one `--setup` name it serves."""
    return {type(registry.get(name)).__module__: name for name in reversed(SETUP_NAMES)}


# Setup modules that still import another, each with why and until when (none).
SIBLING_IMPORTS_LEFT: dict[tuple[str, str], str] = {}


def test_no_setup_module_imports_another():
    """What several setups share lives in a common module (`students`, `kinds`, `draws`...), so a
    setup module, the module of a registered setup, imports no other setup's module (but those of
    SIBLING_IMPORTS_LEFT, each of which must still be there)."""
    setups = setup_modules()
    found = {(name, statement.target): statement for name in setups for statement in IMPORTS[name]
             if statement.target in setups and statement.target != name}
    offenders = [f"{statement.at}: the --setup={setups[name]} module imports {target}, the "
                 f"--setup={setups[target]} module"
                 for (name, target), statement in found.items()
                 if (name, target) not in SIBLING_IMPORTS_LEFT]
    offenders += [f"{MODULES[name].where}:1: no longer imports {target}: drop it from "
                  "SIBLING_IMPORTS_LEFT" for name, target in set(SIBLING_IMPORTS_LEFT) - set(found)]
    assert not offenders, report(offenders)


def test_the_sibling_import_check_finds_one(monkeypatch):
    """On made-up imports: dfad importing distill is reported, with both setup names."""
    source = MODULES["trainers.setups.dfad"]
    monkeypatch.setitem(IMPORTS, source.name, [Import(source, "trainers.setups.distill", 7)])
    with pytest.raises(AssertionError, match=r"dfad.py:7: the --setup=dfad module imports "
                                             r"trainers.setups.distill, the --setup=distill module"):
        test_no_setup_module_imports_another()


def test_the_setup_modules_are_every_registered_setup():
    assert set(setup_modules()) >= {"trainers.setups.distill", "trainers.setups.dfad",
                                    "trainers.setups.cyclegan", "trainers.setups.unconditional"}
    assert "trainers.setups.students" not in setup_modules()


# Words -----------------------------------------------------------------------------------------

# Words BUILD.md's glossary replaced: computing metrics is to "evaluate" (an evaluation, the
# setup's periodic evaluation); "score" is left to the discriminator and the Inception Score.
RETIRED_WORDS = re.compile(r"\bscor(?:er|ers|ing|ings)\b", re.IGNORECASE)


def test_the_code_speaks_no_retired_word():
    offenders = [f"{module.where}:{number}: {match.group(0)!r}"
                 for name, module in MODULES.items()
                 for number, line in enumerate(module.path.read_text().splitlines(), 1)
                 for match in RETIRED_WORDS.finditer(line)]
    assert not offenders, report(offenders)


# Tests -----------------------------------------------------------------------------------------

def test_test_modules_import_no_other_test_module():
    """Shared test helpers live in helper modules (tests/cli.py, tests/trainers/tiny.py, ...) or
    conftest fixtures, so each test module can run, move or go on its own."""
    tests = {}
    for path in sorted((ROOT / "tests").rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        tests[name] = Module(name, path)
    offenders = [f"{statement.at}: imports {statement.target}"
                 for module in tests.values() if module.path.name.startswith("test_")
                 for statement in imports_of(module, known=tests)
                 if statement.target.rpartition(".")[2].startswith("test_")]
    assert not offenders, report(offenders)
