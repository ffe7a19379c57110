"""Turn a scenario's ``palace`` block into the state file every fake process of the run shares.

Drawers and events are filed through the fake's own tool handlers, exactly as a bridge's calls
would file them, so ids, ``seq`` numbers and timestamps have the shapes mempalace 3.11 gives them.
Because ids are made while filing, a seeded event names an earlier one by label: the earlier event
carries ``"as": LABEL`` and any value ``{"$event_id": LABEL}`` in a later one becomes its id (how
``metadata.ack_of`` replies are seeded).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from palace_conformance.errors import UntrustedInputError
from palace_conformance.fake.palace import PalaceStore, run_tool
from palace_conformance.scenarios.model import Palace

#: the palace path the seeding calls report; the state file does not depend on it
SEED_PALACE = "/palace-conformance/seed"
LABEL = "as"  # a seeded event's label, not sent to event_append
EVENT_ID = "$event_id"  # {"$event_id": LABEL}: the id of the earlier event with that label


class PalaceSeedError(UntrustedInputError, ValueError):
    """A starting drawer or event the fake palace refused; names the item and the reason."""


def initial_state(palace: Palace) -> dict[str, Any]:
    """The fake's state JSON (``PALACE_FAKE_STATE``) holding the scenario's starting contents."""
    store = PalaceStore(None, {"diary": [dict(entry) for entry in palace.diary]})
    ids: dict[str, str] = {}
    for kind, tool, items in (("drawer", "mempalace_add_drawer", palace.drawers),
                              ("event", "mempalace_event_append", palace.events)):
        for index, item in enumerate(items):
            args = {k: v for k, v in item.items() if k != LABEL}
            if kind == "event":
                try:
                    args = resolve_event_ids(args, ids)
                except KeyError as exc:
                    raise PalaceSeedError(f"palace event #{index + 1}: no earlier event labelled "
                                          f"{exc.args[0]!r}") from None
            result = run_tool(store, tool, args, SEED_PALACE)
            if result.get("success") is False:
                raise PalaceSeedError(f"palace {kind} #{index + 1}: {result.get('error')}")
            if kind == "event" and isinstance(item.get(LABEL), str):
                ids[item[LABEL]] = result["event"]["id"]
    store.state.initialised = not palace.fresh  # seeded events need no chroma database
    # 3.11 makes the palace directory with its first vector write or event: a fresh palace
    # without seeded events has none yet (so a search leaves nothing half-made in it)
    store.state.directory = not palace.fresh or bool(store.state.events)
    return store.state.to_json()


def resolve_event_ids(value: Any, ids: Mapping[str, str]) -> Any:
    """``value`` with every ``{"$event_id": LABEL}`` replaced by that event's id (KeyError: no
    such label yet)."""
    if isinstance(value, dict):
        if set(value) == {EVENT_ID}:
            return ids[value[EVENT_ID]]
        return {k: resolve_event_ids(v, ids) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve_event_ids(v, ids) for v in value]
    return value


def event_id_references(value: Any, at: str) -> list[tuple[str, Any]]:
    """Every ``{"$event_id": ...}`` inside ``value``: (JSON pointer, the label given)."""
    if isinstance(value, dict):
        if set(value) == {EVENT_ID}:
            return [(at, value[EVENT_ID])]
        return [ref for k, v in value.items() for ref in event_id_references(v, f"{at}/{k}")]
    if isinstance(value, list):
        return [ref for i, v in enumerate(value) for ref in event_id_references(v, f"{at}/{i}")]
    return []


def write_state(palace: Palace, path: str | Path) -> Path:
    """Write :func:`initial_state` to ``path`` (created with its parents) and return it."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(initial_state(palace), ensure_ascii=False, indent=1),
                      encoding="utf-8")
    return target
