"""Mutants known equivalent before running: edits inside annotations Python never evaluates.

With ``from __future__ import annotations`` a parameter's or return annotation, and a variable's
(``x: int | None = ...``), stays a string: ``str | None`` → ``str + None`` changes nothing at run
time. cosmic-ray already spares ``|`` in variable annotations but not in signatures, which would
otherwise be about a quarter of all mutants. A module-level alias (``Decision = A | B``) is
evaluated and is *not* spared.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

Position = tuple[int, int]  # (line from 1, column from 0), as cosmic-ray records them
REASON = "inside an annotation, never evaluated (from __future__ import annotations)"


@dataclass(frozen=True)
class Span:
    start: Position
    end: Position

    def holds(self, position: Position) -> bool:
        return self.start <= position < self.end


def _postponed(tree: ast.Module) -> bool:
    return any(isinstance(node, ast.ImportFrom) and node.module == "__future__"
               and any(alias.name == "annotations" for alias in node.names)
               for node in tree.body)


def _span(node: ast.expr) -> Span:
    end_line = node.end_lineno if node.end_lineno is not None else node.lineno
    end_col = node.end_col_offset if node.end_col_offset is not None else node.col_offset
    return Span((node.lineno, node.col_offset), (end_line, end_col))


def annotation_spans(source: str) -> list[Span]:
    """Where the unevaluated annotations of ``source`` are; none without the future import."""
    tree = ast.parse(source)
    if not _postponed(tree):
        return []
    spans: list[Span] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.arg) and node.annotation is not None:
            spans.append(_span(node.annotation))
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.returns:
            spans.append(_span(node.returns))
        elif isinstance(node, ast.AnnAssign):
            spans.append(_span(node.annotation))
    return spans


def in_annotation(spans: list[Span], position: Position) -> bool:
    return any(span.holds(position) for span in spans)
