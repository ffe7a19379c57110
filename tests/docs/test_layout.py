"""docs/layout.md (the README's "what is where") names every part of the tree: each top-level
file and folder git tracks, each package and top-level module of the kit, each schema and each
document. A part added without a line there fails this test."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LAYOUT = ROOT / "docs" / "layout.md"
KIT = ROOT / "conformance" / "palace_conformance"


def _tracked_top_level() -> set[str]:
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                            check=True).stdout.split()
    return {name.split("/", 1)[0] for name in listed if not name.startswith(".")}


def unnamed(text: str) -> list[str]:
    """The parts of the tree ``text`` does not name."""
    missing = [f"{name} (top level)" for name in sorted(_tracked_top_level()) if name not in text]
    for part in sorted(KIT.iterdir()):
        if part.is_dir() and (part / "__init__.py").exists():
            if not re.search(rf"(?m)^\s+{re.escape(part.name)}/", text):
                missing.append(f"palace_conformance/{part.name}/ (package)")
        elif part.suffix == ".py" and part.name != "__init__.py" and part.name not in text:
            missing.append(f"palace_conformance/{part.name} (module)")
    missing += [f"fixtures/schema/{p.name}" for p in sorted((ROOT / "fixtures" / "schema")
                                                           .glob("*.json")) if p.name not in text]
    missing += [f"docs/{p.name}" for p in sorted((ROOT / "docs").glob("*.md"))
                if p.name not in text]
    return missing


def test_the_layout_names_every_package_schema_and_doc() -> None:
    assert unnamed(LAYOUT.read_text(encoding="utf-8")) == [], \
        "add a line for each to docs/layout.md"


def test_a_part_left_out_of_the_layout_is_named() -> None:
    text = LAYOUT.read_text(encoding="utf-8")
    assert unnamed(text.replace("untrusted_file.py", "")) == [
        "palace_conformance/untrusted_file.py (module)"]
    assert "docs/mutation.md" in unnamed(text.replace("mutation.md", "mutate.md"))
    assert "palace_conformance/relay/ (package)" in unnamed(text.replace("relay/", "relays"))
    assert "fixtures/schema/baseline.schema.json" in unnamed(
        text.replace("baseline.schema.json", ""))
