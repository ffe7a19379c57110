"""Package cycles of the kit, late (function-level) imports included.

``python -m lint.package_cycles [ROOT]`` builds the import graph between the sub-packages (and
top-level modules) of ``palace_conformance`` from the AST of every module, every ``import``
statement wherever it stands (module level, class body, function body), except the ones under
``if TYPE_CHECKING:``, and prints each strongly connected component of more than one package.
Exit status 1 when there is one. A "package" is the first name under the root: ``fake``,
``runner``, ``contract`` ... (folders without ``__init__.py``, such as the fake's own ``mempalace``
package shipped as data, are not modules of the root package and are left out, as import-linter
leaves them out).
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT_PACKAGE = "palace_conformance"


def package_graph(source_root: Path) -> dict[str, set[str]]:
    """Edges ``importer package -> imported package`` inside the root package."""
    graph: dict[str, set[str]] = {}
    package_dir = source_root / ROOT_PACKAGE
    for path in sorted(package_dir.rglob("*.py")):
        if not _importable(path, package_dir):
            continue  # data shipped inside the package (the fake's own ``mempalace`` package)
        relative = path.relative_to(source_root).with_suffix("")
        parts = list(relative.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if len(parts) < 2:
            continue
        owner = parts[1]
        is_package = path.name == "__init__.py"
        graph.setdefault(owner, set())
        for target in _imports(path, parts, is_package):
            target_parts = target.split(".")
            if target_parts[0] != ROOT_PACKAGE or len(target_parts) < 2:
                continue
            if target_parts[1] != owner:
                graph[owner].add(target_parts[1])
    for targets in graph.values():
        targets.intersection_update(graph)  # a name imported from the root is not a package
    return graph


def _importable(path: Path, package_dir: Path) -> bool:
    """A module of the root package: every folder from it down to the file is a package."""
    folder = path.parent
    while folder != package_dir:
        if not (folder / "__init__.py").exists():
            return False
        folder = folder.parent
    return True


def _imports(path: Path, module_parts: list[str], is_package: bool) -> Iterator[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    skipped = {id(node) for node in _type_checking_nodes(tree)}
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module_parts if is_package else module_parts[:-1]
                base = base[: len(base) - (node.level - 1)]
                prefix = ".".join(base)
                module = f"{prefix}.{node.module}" if node.module else prefix
            else:
                module = node.module or ""
            yield module
            for alias in node.names:  # `from pkg import sub` reaches pkg.sub
                yield f"{module}.{alias.name}"


def _type_checking_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                yield from ast.walk(child)


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm; components of one node without a self-loop are left out."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    counter = 0

    def visit(node: str) -> None:
        nonlocal counter
        index[node] = low[node] = counter
        counter += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return components


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    source_root = Path(args[0]) if args else Path(__file__).resolve().parents[1] / "conformance"
    graph = package_graph(source_root)
    components = strongly_connected(graph)
    for component in components:
        print("cycle: " + " ".join(component))
    print(f"{len(graph)} packages, {len(components)} package cycle(s), late imports included")
    return 1 if components else 0


if __name__ == "__main__":
    sys.exit(main())
