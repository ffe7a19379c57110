"""``python -m lint.function_length`` (in ``tox -e lint``): no function over 80 lines in
``conformance/`` and ``reference/``, Python and TypeScript alike; a planted one fails it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "lint"))  # tests/lint shadows the repository's lint package
import function_length  # noqa: E402


def _body(lines: int, indent: str) -> str:
    return "".join(f"{indent}x{i} = {i}\n" for i in range(lines))


def test_the_tree_has_no_function_over_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    assert function_length.offenders([Path("conformance"), Path("reference")]) == []


def test_a_planted_long_python_function_fails_the_check(tmp_path: Path) -> None:
    (tmp_path / "short.py").write_text("def fine():\n" + _body(78, "    "))
    (tmp_path / "long.py").write_text("class C:\n    def grown(self):\n" + _body(80, "        "))
    assert function_length.main([str(tmp_path)]) == 1
    [line] = function_length.offenders([tmp_path])
    assert "long.py:2: C.grown is 81 lines" in line


def test_a_planted_long_typescript_function_fails_the_check(tmp_path: Path) -> None:
    body = "".join(f'  const x{i} = "{{";\n' for i in range(79))  # braces in strings ignored
    (tmp_path / "a.ts").write_text("export function grown(a: number): void {\n" + body + "}\n"
                                   "const ok = (b: string) => {\n  return;\n};\n")
    [line] = function_length.offenders([tmp_path])
    assert "a.ts:1: function `export function grown" in line and "81 lines" in line
