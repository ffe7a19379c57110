"""An import-linter contract type: some modules must not load others *when they are imported*.

Configured as ``lint.import_time`` (import-linter puts the working directory on the path, so
``lint-imports`` run from the checkout finds it).

import-linter's own contracts see every import, including the ones a function makes when it runs.
The command modules import their engines exactly that way, late, so that ``palace-conformance
--help`` and every fake process (which builds the whole parser) stay fast. This contract follows
only the imports that run at import time: module-level statements, class bodies, ``if``/``try``
blocks, but not function bodies and not ``if TYPE_CHECKING:`` blocks, transitively through the
project's own modules.

Configuration (``[[tool.importlinter.contracts]]``, ``type = "import_time_forbidden"``):
``source_modules`` (packages whose modules are checked) and ``forbidden_modules`` (packages that
must not be reached at import time).
"""

from __future__ import annotations

import ast
import importlib.util
from collections.abc import Iterator

import grimp
from importlinter import Contract, ContractCheck, fields, output


class ImportTimeForbiddenContract(Contract):
    type_name = "import_time_forbidden"

    source_modules = fields.ListField(subfield=fields.ModuleField())
    forbidden_modules = fields.ListField(subfield=fields.ModuleField())

    def check(self, graph: grimp.ImportGraph, verbose: bool) -> ContractCheck:
        known = graph.modules
        sources = _within(known, [m.name for m in self.source_modules])  # type: ignore[attr-defined]
        forbidden = [m.name for m in self.forbidden_modules]  # type: ignore[attr-defined]
        chains: list[list[str]] = []
        for source in sorted(sources):
            chain = _first_chain(source, forbidden, known)
            if chain is not None:
                chains.append(chain)
        return ContractCheck(kept=not chains, metadata={"chains": chains})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for chain in check.metadata["chains"]:
            output.print_error(" -> ".join(chain) + "  (at import time)", bold=False)
            output.new_line()


def _within(known: set[str], packages: list[str]) -> set[str]:
    return {m for m in known if any(m == p or m.startswith(p + ".") for p in packages)}


def _first_chain(source: str, forbidden: list[str], known: set[str]) -> list[str] | None:
    """The shortest import-time chain from ``source`` to a forbidden module, if there is one."""
    paths: dict[str, list[str]] = {source: [source]}
    queue = [source]
    while queue:
        module = queue.pop(0)
        for target in sorted(_import_time_targets(module, known)):
            if target in paths:
                continue
            paths[target] = [*paths[module], target]
            if any(target == f or target.startswith(f + ".") for f in forbidden):
                return paths[target]
            queue.append(target)
    return None


def _import_time_targets(module: str, known: set[str]) -> set[str]:
    """The project modules (and their parent packages) that importing ``module`` loads."""
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
        return set()
    with open(spec.origin, encoding="utf-8") as handle:
        tree = ast.parse(handle.read(), spec.origin)
    is_package = spec.submodule_search_locations is not None
    package = module if is_package else module.rpartition(".")[0]
    targets: set[str] = set()
    for node in _import_time_nodes(tree.body):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(node, package)
            names = [base] + [f"{base}.{alias.name}" for alias in node.names]
        for name in names:
            parts = name.split(".")
            for end in range(1, len(parts) + 1):  # importing a.b.c runs a and a.b first
                candidate = ".".join(parts[:end])
                if candidate in known and candidate != module:
                    targets.add(candidate)
    return targets


def _resolve(node: ast.ImportFrom, package: str) -> str:
    if not node.level:
        return node.module or ""
    base = package.split(".")
    base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
    return ".".join([*base, *([node.module] if node.module else [])])


def _import_time_nodes(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If):
            if not _is_type_checking(node.test):
                yield from _import_time_nodes(node.body)
            yield from _import_time_nodes(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody,
                          *(handler.body for handler in node.handlers)):
                yield from _import_time_nodes(block)
        elif isinstance(node, ast.With | ast.ClassDef):
            yield from _import_time_nodes(node.body)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")
