"""The house's floors (pyproject.toml, "The house's floors") and the package-cycle check
(lint/package_cycles.py): the real tree keeps both, and a late (function-level) import that runs
back up a floor breaks both, so neither can be kept by only looking at module-level imports."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
KIT = ROOT / "conformance" / "palace_conformance"
FLOORS = "The house's floors"
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")

sys.path.insert(0, str(ROOT / "lint"))
import package_cycles  # noqa: E402

#: a late import from the fake (a low floor) of the runner (a higher one), planted in a copy
BACK_RUNNING = ("\n\ndef _planted() -> object:\n"
                "    from palace_conformance.runner import results\n\n"
                "    return results\n")


def _floors_contract() -> dict[str, object]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    return next(c for c in contracts if str(c["name"]).startswith(FLOORS))


def _config(contract: dict[str, object]) -> str:
    """An import-linter config holding only ``contract``, over the kit alone."""
    lines = ["[tool.importlinter]", 'root_packages = ["palace_conformance"]',
             "exclude_type_checking_imports = true", "", "[[tool.importlinter.contracts]]"]
    for key, value in contract.items():
        rendered = (f'"{value}"' if isinstance(value, str) else
                    "true" if value is True else
                    "[" + ", ".join(f'"{v}"' for v in value) + "]" if isinstance(value, list)
                    else str(value))
        lines.append(f"{key} = {rendered}")
    return "\n".join(lines) + "\n"


def _lint(source_root: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    config = tmp_path / "floors.toml"
    config.write_text(_config(_floors_contract()), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(source_root)}
    return subprocess.run([str(LINT_IMPORTS), "--no-cache", "--no-logo", str(config)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
                          check=False)


@pytest.fixture
def planted(tmp_path: Path) -> Path:
    """A copy of the kit whose fake imports the runner late, inside a function."""
    copy = tmp_path / "src"
    shutil.copytree(KIT, copy / "palace_conformance",
                    ignore=shutil.ignore_patterns("__pycache__", "node_modules"))
    brain = copy / "palace_conformance" / "fake" / "brain.py"
    brain.write_text(brain.read_text(encoding="utf-8") + BACK_RUNNING, encoding="utf-8")
    return copy


@pytest.mark.skipif(not LINT_IMPORTS.exists(), reason="import-linter is a test dependency")
def test_the_real_tree_keeps_the_floors(tmp_path: Path) -> None:
    done = _lint(ROOT / "conformance", tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "KEPT" in done.stdout and "BROKEN" not in done.stdout


@pytest.mark.skipif(not LINT_IMPORTS.exists(), reason="import-linter is a test dependency")
def test_a_late_import_back_up_a_floor_breaks_the_floors(planted: Path, tmp_path: Path) -> None:
    done = _lint(planted, tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "BROKEN" in done.stdout
    assert "palace_conformance.fake.brain -> palace_conformance.runner.results" in done.stdout


def test_every_package_of_the_kit_sits_on_a_floor() -> None:
    floors = {name.strip() for layer in _floors_contract()["layers"]  # type: ignore[attr-defined]
              for name in str(layer).split("|")}
    packages = {path.stem if path.suffix == ".py" else path.name for path in KIT.iterdir()
                if (path.suffix == ".py" and path.name != "__init__.py")
                or (path / "__init__.py").exists()}
    assert packages == floors


def test_the_real_tree_has_no_package_cycle(capsys: pytest.CaptureFixture[str]) -> None:
    assert package_cycles.main([str(ROOT / "conformance")]) == 0
    assert ", 0 package cycle(s), late imports included" in capsys.readouterr().out


def test_a_late_import_that_closes_a_loop_is_a_package_cycle(
        planted: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert package_cycles.main([str(planted)]) == 1
    out = capsys.readouterr().out
    cycle = next(line for line in out.splitlines() if line.startswith("cycle: "))
    assert {"fake", "runner"} <= set(cycle.split()[1:])


def test_imports_under_type_checking_are_not_edges(tmp_path: Path) -> None:
    package = tmp_path / "palace_conformance"
    for name, source in (("low", "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                 "    from palace_conformance.high import x\n"),
                         ("high", "def f():\n    from palace_conformance.low import y\n")):
        (package / name).mkdir(parents=True)
        (package / name / "__init__.py").write_text(source, encoding="utf-8")
    (package / "__init__.py").write_text("", encoding="utf-8")
    graph = package_cycles.package_graph(tmp_path)
    assert graph == {"low": set(), "high": {"low"}}
    assert package_cycles.strongly_connected(graph) == []
