"""No function over 80 lines in the kit (``conformance/``) and the reference bridges.

``python -m lint.function_length [ROOT ...]`` reads every Python module under the roots (default:
``conformance`` and ``reference``) and every TypeScript/JavaScript source of the TS copies and the
Node hosts (``.ts``, ``.mjs``; ``node_modules`` and generated output left out), and prints one line
per function whose body spans more than :data:`LIMIT` lines, with where it starts. Exit status 1
when there is one. A Python function is measured from its ``def`` (decorators left out) to its
last line, nested functions inside their parent; a TS/JS function from the line of its
``function`` keyword, or of a ``=>`` or a method head, to the line of its closing brace.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator
from pathlib import Path

LIMIT = 80
DEFAULT_ROOTS = ("conformance", "reference")
_SKIPPED_DIRS = {"node_modules", "dist", "build", ".stryker-tmp", "__pycache__", "reports"}
#: a line that opens a function body: ``function f(``, ``async function``, a method head
#: (``name(args) {`` / ``async name(args): T {``) or an arrow with a block body (``=> {``)
_TS_HEAD = re.compile(
    r"(\bfunction\b[^{;]*\{\s*$)"
    r"|(=>\s*\{\s*$)"
    r"|(^\s*(?:(?:public|private|protected|static|async|get|set|override|readonly)\s+)*"
    r"(?!if\b|for\b|while\b|switch\b|catch\b|with\b|return\b)[A-Za-z_$#][\w$]*\s*(?:<[^>]*>)?"
    r"\([^;]*\)\s*(?::\s*[^={;]+)?\{\s*$)")


def _files(root: Path, suffixes: tuple[str, ...]) -> Iterator[Path]:
    for path in sorted(root.rglob("*")):
        if path.suffix in suffixes and path.is_file() \
                and not _SKIPPED_DIRS.intersection(path.relative_to(root).parts):
            yield path


def python_offenders(path: Path) -> list[tuple[int, str, int]]:
    """(first line, qualified name, length) of each over-long function in one module."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found: list[tuple[int, str, int]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (child.end_lineno or child.lineno) - child.lineno + 1
                name = prefix + child.name
                if length > LIMIT:
                    found.append((child.lineno, name, length))
                visit(child, name + ".")
            elif isinstance(child, ast.ClassDef):
                visit(child, prefix + child.name + ".")
            else:
                visit(child, prefix)

    visit(tree, "")
    return found


def _code_only(line: str) -> str:
    """The line with its string literals and ``//`` comment blanked (braces in them ignored)."""
    line = re.sub(r"'(?:\\.|[^'\\])*'|\"(?:\\.|[^\"\\])*\"|`(?:\\.|[^`\\])*`", "''", line)
    return line.split("//", 1)[0]


def script_offenders(path: Path) -> list[tuple[int, str, int]]:
    """(first line, head, length) of each over-long function in one TS/JS file: each line that
    opens a function body is matched to the line where its brace closes."""
    lines = [_code_only(line) for line in path.read_text(encoding="utf-8").splitlines()]
    found: list[tuple[int, str, int]] = []
    for start, line in enumerate(lines):
        if not _TS_HEAD.search(line):
            continue
        depth = 0
        for end in range(start, len(lines)):
            depth += lines[end].count("{") - lines[end].count("}")
            if depth <= 0:
                break
        length = end - start + 1
        if length > LIMIT:
            found.append((start + 1, line.strip()[:60], length))
    return found


def offenders(roots: list[Path]) -> list[str]:
    """One line per over-long function under ``roots``."""
    out = []
    for root in roots:
        for path in _files(root, (".py",)):
            out += [f"{path}:{line}: {name} is {length} lines (at most {LIMIT})"
                    for line, name, length in python_offenders(path)]
        for path in _files(root, (".ts", ".mjs")):
            out += [f"{path}:{line}: function `{head}` is {length} lines (at most {LIMIT})"
                    for line, head, length in script_offenders(path)]
    return out


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    roots = [Path(arg) for arg in args] or [Path(root) for root in DEFAULT_ROOTS]
    found = offenders(roots)
    for line in found:
        print(line)
    if found:
        print(f"{len(found)} function(s) over {LIMIT} lines: split them (docs/layout.md)",
              file=sys.stderr)
        return 1
    print(f"no function over {LIMIT} lines under {', '.join(str(r) for r in roots)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
