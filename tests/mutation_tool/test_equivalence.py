"""Mutants inside unevaluated annotations are spared; evaluated expressions are not."""

from __future__ import annotations

import textwrap

from mutation.equivalence import annotation_spans, in_annotation

SOURCE = textwrap.dedent('''\
    from __future__ import annotations

    Alias = int | str

    def f(x: int | None, y=1 | 2) -> str | None:
        z: int | None = x
        return str(z | 0)
    ''')


def position(source: str, line: int, text: str, nth: int = 0) -> tuple[int, int]:
    row = source.splitlines()[line - 1]
    column = -1
    for _ in range(nth + 1):
        column = row.index(text, column + 1)
    return (line, column)


def test_signature_and_variable_annotations_are_spared() -> None:
    spans = annotation_spans(SOURCE)
    assert in_annotation(spans, position(SOURCE, 5, "|", 0))  # x: int | None
    assert in_annotation(spans, position(SOURCE, 5, "|", 2))  # -> str | None
    assert in_annotation(spans, position(SOURCE, 6, "|"))     # z: int | None


def test_evaluated_expressions_are_not_spared() -> None:
    spans = annotation_spans(SOURCE)
    assert not in_annotation(spans, position(SOURCE, 3, "|"))     # a module-level alias runs
    assert not in_annotation(spans, position(SOURCE, 5, "|", 1))  # a default value runs
    assert not in_annotation(spans, position(SOURCE, 7, "|"))     # a body expression runs


def test_without_the_future_import_annotations_run_and_nothing_is_spared() -> None:
    plain = SOURCE.replace("from __future__ import annotations\n", "")
    assert annotation_spans(plain) == []
