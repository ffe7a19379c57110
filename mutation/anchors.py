"""Stable names for mutants: the enclosing function and the mutated text, not the line.

A triage entry must survive an edit elsewhere in its module, so a mutant is named by where it
is in the code, not by its line: ``MODULE::SCOPE::OPERATOR::TEXT``, where SCOPE is the
qualified name of the innermost function or class around the mutant (``Foo.bar``; decorators
count as part of what they decorate; ``<module>`` outside any), OPERATOR is cosmic-ray's
operator as the report names it (``NumberReplacer#2``), and TEXT the start of the mutated
source text (its first line, at most :data:`TEXT_CAP` characters). When TEXT occurs more than
once in the scope's source, the operator carries which occurrence it is: ``AddNot@3``. Scopes
sharing one name (a property and its setter) count as one, in source order.

The name and a position are each computed from the other with the module's source alone
(:func:`anchor_of`, :func:`resolve`), so the triage file can be checked against the checkout
without cosmic-ray: an anchor whose scope or text is gone is stale, one without ``@N`` whose
text now occurs several times is ambiguous. Columns are characters, as cosmic-ray's are.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache

SEPARATOR = "::"
MODULE_SCOPE = "<module>"
TEXT_CAP = 60
Position = tuple[int, int]  # (line from 1, column from 0), as cosmic-ray records them


class AnchorError(Exception):
    """An anchor that is malformed, stale or ambiguous for the source given; one line."""


@dataclass(frozen=True)
class Anchor:
    module: str
    scope: str
    operator: str
    text: str
    occurrence: int | None = None  # 1-based; None: the text occurs once in the scope

    def __str__(self) -> str:
        operator = self.operator if self.occurrence is None else \
            f"{self.operator}@{self.occurrence}"
        return SEPARATOR.join([self.module, self.scope, operator, self.text])

    @classmethod
    def parse(cls, anchor: str) -> Anchor:
        parts = anchor.split(SEPARATOR, 3)
        if len(parts) != 4 or not all(parts[:3]) or not parts[3].strip() \
                or not parts[0].endswith(".py"):
            raise AnchorError(f"{anchor!r} is not MODULE::SCOPE::OPERATOR::TEXT (copy it from "
                              "the report)")
        module, scope, operator, text = parts
        name, at, number = operator.partition("@")
        occurrence = None
        if at:
            if not number.isdigit() or int(number) < 1:
                raise AnchorError(f"{anchor!r}: the occurrence after '@' must be 1 or more")
            occurrence = int(number)
        return cls(module, scope, name, text, occurrence)


@dataclass(frozen=True)
class _Scopes:
    """A module's source as one string, its line offsets, and each scope's character spans."""

    source: str
    starts: tuple[int, ...]  # offset of each line's first character
    spans: tuple[tuple[str, int, int], ...]  # (qualified name, start offset, end offset)

    def offset(self, position: Position) -> int:
        line, column = position
        if not 1 <= line <= len(self.starts):
            raise AnchorError(f"line {line} is not in the module")
        return self.starts[line - 1] + column

    def position(self, offset: int) -> Position:
        line = max(i for i, start in enumerate(self.starts) if start <= offset)
        return line + 1, offset - self.starts[line]

    def scope_at(self, offset: int) -> str:
        inside = [(start, name) for name, start, end in self.spans if start <= offset < end]
        return max(inside)[1] if inside else MODULE_SCOPE

    def regions(self, scope: str) -> list[tuple[int, int]]:
        if scope == MODULE_SCOPE:
            return [(0, len(self.source))]
        return [(start, end) for name, start, end in self.spans if name == scope]

    def occurrences(self, scope: str, text: str) -> list[int]:
        found = []
        for start, end in self.regions(scope):
            at = self.source.find(text, start, end)
            while at != -1:
                found.append(at)
                at = self.source.find(text, at + 1, end)
        return found


_Definition = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


def _definitions(tree: ast.AST, prefix: str = "") -> Iterator[tuple[str, _Definition]]:
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            name = f"{prefix}{node.name}"
            yield name, node
            yield from _definitions(node, f"{name}.")
        else:
            yield from _definitions(node, prefix)


@cache
def _scopes(source: str) -> _Scopes:
    lines = source.splitlines(keepends=True)
    starts, total = [], 0
    for line in lines:
        starts.append(total)
        total += len(line)
    starts.append(total)  # the position just past a last line with no newline

    def char_offset(line: int, byte_column: int) -> int:  # ast columns are UTF-8 bytes
        text = lines[line - 1].encode("utf-8")[:byte_column].decode("utf-8", "replace")
        return starts[line - 1] + len(text)

    spans = []
    for name, node in _definitions(ast.parse(source)):
        first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
        end_line = node.end_lineno or node.lineno
        end_col = node.end_col_offset or 0
        spans.append((name, starts[first - 1], char_offset(end_line, end_col)))
    return _Scopes(source, tuple(starts), tuple(spans))


def _text(scopes: _Scopes, start: int, end: int) -> str:
    segment = scopes.source[start:max(end, start + 1)]
    return segment.split("\n", 1)[0][:TEXT_CAP].rstrip() or segment[:1]


def anchor_of(module: str, source: str, operator: str, start: Position,
              end: Position) -> Anchor:
    """The anchor of the mutant of ``operator`` over ``start``..``end`` of ``source``."""
    try:
        scopes = _scopes(source)
    except SyntaxError as exc:
        raise AnchorError(f"{module} does not parse: {exc.msg}") from None
    begin = scopes.offset(start)
    finish = scopes.offset(end) if end > start else begin + 1
    if begin >= len(source):
        raise AnchorError(f"{module}: {start} is past the end of the module")
    scope = scopes.scope_at(begin)
    text = _text(scopes, begin, finish)
    found = scopes.occurrences(scope, text)
    occurrence = found.index(begin) + 1 if len(found) > 1 else None
    return Anchor(module, scope, operator, text, occurrence)


def resolve(anchor: Anchor, source: str) -> Position:
    """Where ``anchor`` points in ``source``; :class:`AnchorError` when it is stale (the scope
    or the text is gone) or ambiguous (no ``@N`` and the text occurs several times)."""
    scopes = _scopes(source)
    where = f"{anchor}: "
    if not scopes.regions(anchor.scope):
        raise AnchorError(f"{where}stale: {anchor.module} has no function or class "
                          f"{anchor.scope} now (triage the mutant again under its new anchor)")
    found = scopes.occurrences(anchor.scope, anchor.text)
    if anchor.occurrence is None and len(found) > 1:
        raise AnchorError(f"{where}ambiguous: {anchor.text!r} occurs {len(found)} times in "
                          f"{anchor.scope} now (take the anchor the report prints, with '@N')")
    index = (anchor.occurrence or 1) - 1
    if index >= len(found):
        raise AnchorError(f"{where}stale: {anchor.scope} has {len(found)} occurrence(s) of "
                          f"{anchor.text!r} now (triage the mutant again under its new anchor)")
    return scopes.position(found[index])
