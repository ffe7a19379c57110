"""The second generator's operators: mutants that err the way a bridge author errs.

cosmic-ray's operators flip a comparison, change a constant or drop a ``not``: mechanical edits
the catalogue now kills almost always. The bugs that survive it are of other kinds (issue 27):
two argv items in the wrong order, a header or a keyword argument forgotten, a description cut
short, a default that differs, a statement left out, a gate the wrong way round, a window one
off, an ``await`` forgotten, an error swallowed. Each operator below writes one such mistake,
one mutant per place it applies, over the module's AST, and nothing else:

========================  ===================================================================
``SwapArgs``              two adjacent positional arguments of a call, or the values of two
                          adjacent keyword arguments, swapped
``SwapItems``             two adjacent items of a list or tuple swapped (an argv, a header
                          pair); not where order cannot matter (``in (...)``, ``isinstance``,
                          an ``except`` clause)
``DropKey``               one entry of a dict literal left out (a header, a payload field)
``DropKeyword``           one keyword argument of a call left out (``env=``, ``timeout_ms=``)
``CutString``             a string constant cut to its first half
``AlterString``           a string constant with its first letter's case swapped (a typo)
``ChangeDefault``         a default changed: a parameter's or a class field's number or bool,
                          or the fallback of ``.get(key, default)``
``DeleteStatement``       a call statement, or an assignment to an attribute or an item,
                          replaced by ``pass``
``InvertGate``            an ``if``/``elif``/``while``/conditional expression's test negated;
                          for ``a and b`` / ``a or b``, each operand on its own
``OffByOne``              ``<`` and ``<=`` (``>`` and ``>=``) exchanged; an integer in a
                          comparison or an augmented assignment (a counter) one higher
``DropAwait``             an ``await`` left out (the coroutine never runs)
``SwallowRaise``          a ``raise`` replaced by ``pass`` (the error is swallowed)
========================  ===================================================================

Never mutated: docstrings, annotations (never evaluated, ``from __future__ import
annotations``), ``if TYPE_CHECKING`` blocks and ``__all__``.

Each mutant is a text edit of the module (start and end offsets, the replacement), so its diff
is one place; its position (``start``..``end``, 1-based line and 0-based character column, as
:mod:`mutation.anchors` takes them) spans the code it mistakes, which names it in the triage.
The list is deterministic: the same source gives the same mutants in the same order. Pure code.
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Iterator
from dataclasses import dataclass

OPERATORS = ("SwapArgs", "SwapItems", "DropKey", "DropKeyword", "CutString", "AlterString",
             "ChangeDefault", "DeleteStatement", "InvertGate", "OffByOne", "DropAwait",
             "SwallowRaise")
Position = tuple[int, int]


@dataclass(frozen=True)
class Mutant:
    """One mistake in one module: the edit (``source[begin:finish]`` becomes ``replacement``,
    character offsets) and the span of code it mistakes (line, column), for its anchor."""

    module: str
    operator: str  # with "#2", "#3" ... for a further mutant of one operator at one place
    start: Position
    end: Position
    begin: int
    finish: int
    replacement: str

    @property
    def key(self) -> str:
        return f"{self.module}:{self.start[0]}:{self.start[1]}:{self.operator}"

    def apply(self, source: str) -> str:
        return source[:self.begin] + self.replacement + source[self.finish:]


class _Text:
    """The source with AST positions (UTF-8 byte columns) turned into character offsets."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.lines = source.splitlines(keepends=True)
        self.starts: list[int] = []
        total = 0
        for line in self.lines:
            self.starts.append(total)
            total += len(line)
        self.starts.append(total)

    def column(self, line: int, byte_column: int) -> int:
        if line > len(self.lines):
            return 0
        raw = self.lines[line - 1].encode("utf-8")[:byte_column]
        return len(raw.decode("utf-8", "replace"))

    def start(self, node: ast.AST) -> Position:
        line = node.lineno  # type: ignore[attr-defined]
        return line, self.column(line, node.col_offset)  # type: ignore[attr-defined]

    def end(self, node: ast.AST) -> Position:
        line = node.end_lineno  # type: ignore[attr-defined]
        return line, self.column(line, node.end_col_offset)  # type: ignore[attr-defined]

    def offset(self, position: Position) -> int:
        return self.starts[position[0] - 1] + position[1]

    def of(self, node: ast.AST) -> str:
        return self.source[self.offset(self.start(node)):self.offset(self.end(node))]


def _docstrings(tree: ast.Module) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                found.add(id(body[0]))
                found.add(id(body[0].value))
    return found


def _spared(tree: ast.Module) -> set[int]:
    """Nodes no operator touches: annotations, TYPE_CHECKING blocks, ``__all__``, f-string
    parts (their text is not a literal of its own), and everything inside them."""
    roots: list[ast.AST] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.arg) and node.annotation is not None:
            roots.append(node.annotation)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.returns:
            roots.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            roots.append(node.annotation)
        elif (isinstance(node, ast.If) and "TYPE_CHECKING" in ast.dump(node.test)) or (
                isinstance(node, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)):
            roots.append(node)
        elif isinstance(node, ast.JoinedStr):
            roots += [v for v in node.values if isinstance(v, ast.Constant)]
    return {id(inner) for root in roots for inner in ast.walk(root)}


def _parents(tree: ast.Module) -> dict[int, ast.AST]:
    return {id(child): node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


def _unordered(node: ast.AST, parent: ast.AST | None) -> bool:
    """A sequence whose order cannot matter: ``x in (...)``, ``isinstance(x, (...))``, an
    ``except (...)`` clause."""
    if isinstance(parent, ast.Compare) and node in parent.comparators and any(
            isinstance(op, ast.In | ast.NotIn) for op in parent.ops):
        return True
    if isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name) and \
            parent.func.id in ("isinstance", "issubclass"):
        return True
    return isinstance(parent, ast.ExceptHandler)


def _string(value: object) -> bool:
    return isinstance(value, str)


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


class _Generator:
    def __init__(self, module: str, source: str) -> None:
        self.module = module
        self.text = _Text(source)
        self.tree = ast.parse(source)
        self.spared = _spared(self.tree) | _docstrings(self.tree)
        self.parents = _parents(self.tree)
        self.found: list[Mutant] = []

    def add(self, operator: str, node: ast.AST, begin: int, finish: int,
            replacement: str, span_end: ast.AST | None = None) -> None:
        if self.text.source[begin:finish] == replacement:
            return
        self.found.append(Mutant(self.module, operator, self.text.start(node),
                                 self.text.end(span_end or node), begin, finish, replacement))

    def replace(self, operator: str, node: ast.AST, replacement: str) -> None:
        begin = self.text.offset(self.text.start(node))
        finish = self.text.offset(self.text.end(node))
        self.add(operator, node, begin, finish, replacement)

    def swap(self, operator: str, first: ast.AST, second: ast.AST) -> None:
        a, b = self.text.of(first), self.text.of(second)
        if a == b:
            return
        begin = self.text.offset(self.text.start(first))
        finish = self.text.offset(self.text.end(second))
        between = self.text.source[self.text.offset(self.text.end(first)):
                                   self.text.offset(self.text.start(second))]
        self.add(operator, first, begin, finish, b + between + a, span_end=second)

    def drop(self, operator: str, items: list[tuple[ast.AST, ast.AST]], index: int) -> None:
        """Leave out ``items[index]`` (its first and last node) of a comma-separated run."""
        first, last = items[index]
        if index + 1 < len(items):
            begin = self.text.offset(self.text.start(first))
            finish = self.text.offset(self.text.start(items[index + 1][0]))
        elif index > 0:
            begin = self.text.offset(self.text.end(items[index - 1][1]))
            finish = self.text.offset(self.text.end(last))
        else:
            begin = self.text.offset(self.text.start(first))
            finish = self.text.offset(self.text.end(last))
        self.add(operator, first, begin, finish, "", span_end=last)

    def run(self) -> list[Mutant]:
        for node in ast.walk(self.tree):
            if id(node) in self.spared:
                continue
            self.visit(node)
        ordered = sorted(self.found, key=lambda m: (m.start, m.end, m.operator, m.replacement))
        seen: dict[tuple[Position, str], int] = {}
        numbered = []
        for mutant in ordered:
            place = (mutant.start, mutant.operator)
            seen[place] = seen.get(place, 0) + 1
            if seen[place] > 1:
                mutant = Mutant(mutant.module, f"{mutant.operator}#{seen[place]}", mutant.start,
                                mutant.end, mutant.begin, mutant.finish, mutant.replacement)
            numbered.append(mutant)
        return numbered

    def visit(self, node: ast.AST) -> None:
        if isinstance(node, ast.Call):
            self.call(node)
        elif isinstance(node, ast.List | ast.Tuple) and isinstance(node.ctx, ast.Load):
            if not _unordered(node, self.parents.get(id(node))):
                for a, b in zip(node.elts, node.elts[1:], strict=False):
                    if not isinstance(a, ast.Starred) and not isinstance(b, ast.Starred):
                        self.swap("SwapItems", a, b)
        elif isinstance(node, ast.Dict):
            entries = [(k, v) for k, v in zip(node.keys, node.values, strict=True)]
            pairs: list[tuple[ast.AST, ast.AST]] = [(k if k is not None else v, v)
                                                    for k, v in entries]
            for index, (key, _) in enumerate(entries):
                if key is not None:
                    self.drop("DropKey", pairs, index)
        elif isinstance(node, ast.Constant) and _string(node.value):
            self.string(node)
        elif isinstance(node, ast.arguments):
            for default in [*node.defaults, *(d for d in node.kw_defaults if d is not None)]:
                self.default(default)
        elif isinstance(node, ast.AnnAssign) and node.value is not None and \
                isinstance(self.parents.get(id(node)), ast.ClassDef):
            self.default(node.value)
        elif isinstance(node, ast.stmt):
            self.statement(node)
        elif isinstance(node, ast.IfExp):
            self.gate(node.test)
        elif isinstance(node, ast.Compare):
            self.compare(node)
        elif isinstance(node, ast.Await):
            self.replace("DropAwait", node, self.text.of(node.value))

    def call(self, node: ast.Call) -> None:
        args = [a for a in node.args if not isinstance(a, ast.Starred)]
        if len(args) == len(node.args):
            for a, b in itertools.pairwise(args):
                self.swap("SwapArgs", a, b)
        named = [k for k in node.keywords if k.arg is not None]
        for first, second in itertools.pairwise(named):
            self.swap("SwapArgs", first.value, second.value)
        every: list[tuple[ast.AST, ast.AST]] = [(a, a) for a in node.args]
        every += [(k, k.value) for k in node.keywords]
        for index, keyword in enumerate(node.keywords):
            if keyword.arg is not None:
                self.drop("DropKeyword", every, len(node.args) + index)
        if isinstance(node.func, ast.Attribute) and node.func.attr == "get" and \
                len(node.args) == 2 and isinstance(node.args[1], ast.Constant):
            self.default(node.args[1])

    def string(self, node: ast.Constant) -> None:
        value = str(node.value)
        if len(value) >= 2:
            self.replace("CutString", node, repr(value[:len(value) // 2]))
        letters = [i for i, c in enumerate(value) if c.isalpha() and c.swapcase() != c]
        if letters:
            i = letters[0]
            self.replace("AlterString", node, repr(value[:i] + value[i].swapcase() +
                                                   value[i + 1:]))

    def default(self, node: ast.expr) -> None:
        if id(node) in self.spared or not isinstance(node, ast.Constant):
            return
        value = node.value
        if isinstance(value, bool):
            self.replace("ChangeDefault", node, repr(not value))
        elif isinstance(value, int | float) and _number(value):
            changed = 1 if value == 0 else value * 2
            self.replace("ChangeDefault", node, repr(changed))
        elif _string(value) and value:
            self.replace("ChangeDefault", node, "''")

    def statement(self, node: ast.stmt) -> None:
        if isinstance(node, ast.If | ast.While):
            self.gate(node.test)
        elif isinstance(node, ast.Raise):
            self.replace("SwallowRaise", node, "pass")
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call | ast.Await):
            self.replace("DeleteStatement", node, "pass")
        elif isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Attribute | ast.Subscript) for t in targets) and \
                    getattr(node, "value", None) is not None:
                self.replace("DeleteStatement", node, "pass")
            if isinstance(node, ast.AugAssign) and isinstance(node.value, ast.Constant) and \
                    isinstance(node.value.value, int) and not isinstance(node.value.value, bool):
                self.replace("OffByOne", node.value, repr(node.value.value + 1))

    def gate(self, test: ast.expr) -> None:
        if isinstance(test, ast.BoolOp):
            for operand in test.values:
                self.replace("InvertGate", operand, f"not ({self.text.of(operand)})")
        elif isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            self.replace("InvertGate", test, self.text.of(test.operand))
        else:
            self.replace("InvertGate", test, f"not ({self.text.of(test)})")

    def compare(self, node: ast.Compare) -> None:
        flips: dict[type[ast.cmpop], str] = {ast.Lt: "<=", ast.LtE: "<", ast.Gt: ">=",
                                              ast.GtE: ">"}
        left: ast.expr = node.left
        for op, right in zip(node.ops, node.comparators, strict=True):
            flipped = flips.get(type(op))
            if flipped is not None:
                begin = self.text.offset(self.text.end(left))
                finish = self.text.offset(self.text.start(right))
                between = self.text.source[begin:finish]
                symbol = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}[type(op)]
                self.add("OffByOne", left, begin, finish,
                         between.replace(symbol, flipped, 1), span_end=right)
                for side in (left, right):
                    if isinstance(side, ast.Constant) and _number(side.value) and \
                            isinstance(side.value, int):
                        self.replace("OffByOne", side, repr(side.value + 1))
            left = right


def generate(module: str, source: str) -> list[Mutant]:
    """Every mutant of the module, in source order (deterministic)."""
    return _Generator(module, source).run()


def mutants_by_key(module: str, source: str) -> dict[str, Mutant]:
    return {m.key: m for m in generate(module, source)}


def check(mutants: list[Mutant], source: str) -> Iterator[tuple[Mutant, str]]:
    """Each mutant with why it is unusable ("" when it parses and differs from the source)."""
    for mutant in mutants:
        mutated = mutant.apply(source)
        if mutated == source:
            yield mutant, "no change"
            continue
        try:
            ast.parse(mutated)
        except SyntaxError as exc:
            yield mutant, f"does not parse: {exc.msg}"
            continue
        yield mutant, ""
