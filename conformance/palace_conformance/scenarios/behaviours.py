"""The numbered behaviours a scenario may cite (``covers``), from ``fixtures/behaviours.json``.

BEHAVIOURS.md is the prose the IDs come from; the JSON copy ships with the package so that a wheel
can check coverage on its own. ``--behaviours`` also reads the Markdown checklist directly (every
line ``- ID title``), so a newer checklist can be compared without regenerating anything.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from palace_conformance.errors import UntrustedInputError
from palace_conformance.resources import fixtures_dir

ID_PATTERN = re.compile(r"^[A-Z]+-[0-9]{2}$")
#: conformance levels, strictest last: ``core`` is what any bridge must do, ``seed`` adds the seed
#: bridge's conventions; ``fake`` marks the fake's own fidelity checks (never a bridge's)
LEVELS = ("core", "seed", "fake")
_MD_LINE = re.compile(r"^- ([A-Z]+-[0-9]{2}) (.+)$")


class BehavioursError(UntrustedInputError, ValueError):
    """A behaviours file that cannot be read; the message names the file and the fix."""


@dataclass(frozen=True)
class Behaviour:
    id: str
    title: str
    level: str = "seed"  # a checklist without levels is read the strict way

    @property
    def area(self) -> str:
        return self.id.split("-", 1)[0]


def default_path() -> Path:
    return fixtures_dir() / "behaviours.json"


def load_behaviours(path: str | Path | None = None) -> list[Behaviour]:
    """Behaviours in file order, from a ``behaviours.json`` or a BEHAVIOURS.md-style checklist."""
    source = Path(path) if path is not None else default_path()
    try:
        text = source.read_text(encoding="utf-8")
    except OSError as exc:
        raise BehavioursError(f"cannot read behaviours file {source}: {exc.strerror}") from None
    if source.suffix.lower() in (".md", ".markdown", ".txt"):
        shipped = {b.id: b.level for b in load_behaviours()} if path is not None else {}
        found = [Behaviour(m.group(1), m.group(2).strip(), shipped.get(m.group(1), "seed"))
                 for m in map(_MD_LINE.match, text.splitlines()) if m]
    else:
        found = _from_json(text, source)
    if not found:
        raise BehavioursError(f"{source} lists no behaviour IDs (expected lines '- LIFE-01 ...' "
                              "or a behaviours.json)")
    ids = [b.id for b in found]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise BehavioursError(f"{source} lists {', '.join(dupes)} more than once; keep one of each")
    return found


def _from_json(text: str, source: Path) -> list[Behaviour]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BehavioursError(f"{source} is not JSON (line {exc.lineno}, column {exc.colno}: "
                              f"{exc.msg})") from None
    items = data.get("behaviours") if isinstance(data, dict) else None
    if not isinstance(items, list):
        raise BehavioursError(f"{source}: expected an object with a 'behaviours' list of "
                              "{id, title, level?}")
    found = []
    for item in items:
        if not (isinstance(item, dict) and isinstance(item.get("id"), str)
                and ID_PATTERN.match(item["id"]) and isinstance(item.get("title"), str)
                and item.get("level", "seed") in LEVELS):
            raise BehavioursError(f"{source}: bad entry {item!r} (each needs an 'id' like LIFE-01 "
                                  f"and a 'title', and its 'level' is one of {', '.join(LEVELS)})")
        found.append(Behaviour(item["id"], item["title"], item.get("level", "seed")))
    return found
