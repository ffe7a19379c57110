"""Turn a scenario's ``palace`` block into the state file every fake process of the run shares.

Drawers and events are filed through the fake's own tool handlers, exactly as a bridge's calls
would file them, so ids, ``seq`` numbers and timestamps have the shapes mempalace 3.11 gives them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..fake.palace import PalaceStore, run_tool
from .model import Palace

#: the palace path the seeding calls report; the state file does not depend on it
SEED_PALACE = "/palace-conformance/seed"


class PalaceSeedError(ValueError):
    """A starting drawer or event the fake palace refused; names the item and the reason."""


def initial_state(palace: Palace) -> dict[str, Any]:
    """The fake's state JSON (``PALACE_FAKE_STATE``) holding the scenario's starting contents."""
    store = PalaceStore(None, {"diary": [dict(entry) for entry in palace.diary]})
    for kind, tool, items in (("drawer", "mempalace_add_drawer", palace.drawers),
                              ("event", "mempalace_event_append", palace.events)):
        for index, item in enumerate(items):
            result = run_tool(store, tool, dict(item), SEED_PALACE)
            if result.get("success") is False:
                raise PalaceSeedError(f"palace {kind} #{index + 1}: {result.get('error')}")
    return store.state.to_json()


def write_state(palace: Palace, path: str | Path) -> Path:
    """Write :func:`initial_state` to ``path`` (created with its parents) and return it."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(initial_state(palace), ensure_ascii=False, indent=1),
                      encoding="utf-8")
    return target
