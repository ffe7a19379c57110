"""The import-time contract (lint/import_time.py) must see what runs at import and nothing else."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import grimp
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "lint"))
import import_time


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A throwaway package ``proj``: write modules into it, then ask for chains."""
    root = tmp_path / "proj"
    root.mkdir()
    (root / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield root
    for name in [m for m in sys.modules if m == "proj" or m.startswith("proj.")]:
        del sys.modules[name]


def write(root: Path, name: str, source: str) -> None:
    (root / f"{name}.py").write_text(textwrap.dedent(source))


def chain(source: str) -> list[str] | None:
    known = grimp.build_graph("proj", cache_dir=None).modules
    return import_time._first_chain(source, ["proj.engine"], known)


def test_a_module_level_import_is_followed_transitively(project: Path) -> None:
    write(project, "engine", "")
    write(project, "middle", "from proj import engine\n")
    write(project, "command", "import proj.middle\n")
    assert chain("proj.command") == ["proj.command", "proj.middle", "proj.engine"]


def test_imports_in_functions_and_type_checking_blocks_are_not_import_time(project: Path) -> None:
    write(project, "engine", "")
    write(project, "command", """
        from typing import TYPE_CHECKING
        if TYPE_CHECKING:
            from proj import engine
        def run():
            from proj import engine
            return engine
    """)
    assert chain("proj.command") is None


def test_class_bodies_try_blocks_and_relative_imports_count(project: Path) -> None:
    write(project, "engine", "")
    write(project, "in_class", "class C:\n    from . import engine\n")
    write(project, "in_try", "try:\n    from .engine import x\nexcept ImportError:\n    pass\n")
    assert chain("proj.in_class") == ["proj.in_class", "proj.engine"]
    assert chain("proj.in_try") == ["proj.in_try", "proj.engine"]
