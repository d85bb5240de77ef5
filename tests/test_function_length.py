"""No function in `trainers/` or `gan/` runs over FUNCTION_LINE_LIMIT lines unless a comment
says why it must be one piece.

A long function hides its steps: split it into small named functions, each testable alone. A
function is measured from its `def` to its last line, nested functions included (they are
part of the outer one); each method of a class is measured on its own. The exemption is a
comment containing EXEMPTION on the line right above the `def` (or its first decorator), or
between the `def` and its first body line included, e.g. ``# one piece: <why>``.
"""

import ast
import io
import pathlib
import tokenize

FUNCTION_LINE_LIMIT = 60
EXEMPTION = "one piece:"
ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = ("trainers", "gan")


def outermost_functions(node: ast.AST, prefix: str = ""):
    """(qualified name, node) of every function not nested in another function."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield prefix + child.name, child
        elif isinstance(child, ast.ClassDef):
            yield from outermost_functions(child, f"{prefix}{child.name}.")
        else:
            yield from outermost_functions(child, prefix)


def comments(source: str) -> dict[int, str]:
    """Line number -> the text of the comment on that line (strings are not comments)."""
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    return {token.start[0]: token.string for token in tokens if token.type == tokenize.COMMENT}


def explained(function: ast.FunctionDef, comment_lines: dict[int, str]) -> bool:
    """Whether a comment near the `def` of `function` carries EXEMPTION (see the docstring)."""
    first = min([function.lineno, *(decorator.lineno for decorator in function.decorator_list)])
    near = [first - 1, *range(function.lineno, function.body[0].lineno + 1)]
    return any(EXEMPTION in comment_lines.get(line, "") for line in near)


def long_functions(source: str, limit: int = FUNCTION_LINE_LIMIT) -> list[tuple[str, int]]:
    """(qualified name, lines) of each function of `source` over `limit` lines, unexplained."""
    comment_lines = comments(source)
    found = []
    for name, function in outermost_functions(ast.parse(source)):
        length = function.end_lineno - function.lineno + 1
        if length > limit and not explained(function, comment_lines):
            found.append((name, length))
    return found


def test_no_function_in_trainers_or_gan_is_over_the_limit():
    too_long = [f"{path.relative_to(ROOT)}: {name} has {length} lines"
                for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))
                for name, length in long_functions(path.read_text())]
    assert not too_long, (
        f"Functions over {FUNCTION_LINE_LIMIT} lines: {too_long}; split each into small named "
        f"functions, or put a comment '# {EXEMPTION} <why>' right above its def.")


def numbered_body(count: int, indent: str = "    ") -> str:
    return "".join(f"{indent}x{i} = {i}\n" for i in range(count))


def test_the_checker_flags_a_long_function_and_accepts_an_explained_one():
    long = "def long():\n" + numbered_body(FUNCTION_LINE_LIMIT)
    assert long_functions(long) == [("long", FUNCTION_LINE_LIMIT + 1)]
    assert long_functions("def short():\n" + numbered_body(FUNCTION_LINE_LIMIT - 1)) == []
    assert long_functions("# one piece: one table of constants\n" + long) == []
    inside = "def long():\n    # one piece: one table\n" + numbered_body(FUNCTION_LINE_LIMIT)
    assert long_functions(inside) == []
    assert long_functions("# one piece: one table\n@decorated\n" + long) == []
    flagged = [("long", FUNCTION_LINE_LIMIT + 1)]
    assert long_functions("@decorated\n" + long) == flagged
    assert long_functions("# a comment that says nothing\n" + long) == flagged
    assert long_functions('x = "# one piece: not a comment"\n' + long) == flagged


def test_nested_functions_count_within_their_outer_function_and_methods_alone():
    half = FUNCTION_LINE_LIMIT // 2
    nested = ("def outer():\n" + numbered_body(half)
              + "    def inner():\n" + numbered_body(half, " " * 8))
    assert long_functions(nested) == [("outer", 2 * half + 2)]
    methods = ("class Model:\n"
               + "".join(f"    def m{j}(self):\n" + numbered_body(half, " " * 8) for j in range(3)))
    assert long_functions(methods) == []
    assert long_functions("class Model:\n    def long(self):\n"
                          + numbered_body(FUNCTION_LINE_LIMIT, " " * 8)) == [
        ("Model.long", FUNCTION_LINE_LIMIT + 1)]
