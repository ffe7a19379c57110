"""The fake palace's graphs: the knowledge graph beyond add/query, and the room graph (tunnels,
hallways, traversal) as mempalace 3.11.0 answers them.

Argument checks and empty-palace answers are pinned to the truth table
(``fixtures/catalogue/mempalace-3.11.0-answers.json``); answers over a populated graph follow
3.11's shapes where they were seen, and approximate its ranking (README, "Fidelity").
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any

from palace_conformance.fake.palace import (
    PalaceState,
    entity_key,
    entity_names,
    fresh,
    half_make,
    optional_name,
    tool,
    triple_id_part,
)
from palace_conformance.fake.palace_checks import (
    argument_problem,
    checked_fact,
)


def _today() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d")


def _fact(subject: str, predicate: str, obj: str) -> str:
    return f"{subject} \u2192 {predicate} \u2192 {obj}"


def _is_current(triple: dict[str, Any], today: str) -> bool:
    return triple.get("valid_to") is None or triple["valid_to"] > today


def _end(state: PalaceState, subject: str, predicate: str, obj: str, ended: str) -> None:
    for triple in state.triples:
        if ((triple["subject"], triple["predicate"], triple["object"]) == (subject, predicate, obj)
                and triple.get("valid_to") is None):
            triple["valid_to"] = ended


# --- knowledge graph -----------------------------------------------------------------------


@tool("mempalace_kg_invalidate", writes=True)
def _kg_invalidate(state: PalaceState, args: dict[str, Any]) -> dict[str, Any]:
    refused, args = checked_fact(args, ("object",), ("ended",))
    if refused is not None:
        return refused
    ended = args.get("ended") or _today()
    _end(state, args["subject"], args["predicate"], args["object"], ended)
    # 3.11 answers success whether or not a current fact matched
    return {"success": True, "fact": _fact(args["subject"], args["predicate"], args["object"]),
            "ended": ended}


@tool("mempalace_kg_supersede", writes=True)
def _kg_supersede(state: PalaceState, args: dict[str, Any]) -> dict[str, Any]:
    refused, args = checked_fact(args, ("old_object", "new_object"), ("at",))
    if refused is not None:
        return refused
    subject, predicate, new = args["subject"], args["predicate"], args["new_object"]
    at = args.get("at") or _today()
    _end(state, subject, predicate, args["old_object"], at)
    digest = hashlib.sha256("\x1f".join((subject, predicate, new, at)).encode()).hexdigest()[:12]
    triple_id = (f"t_{triple_id_part(subject)}_{triple_id_part(predicate)}_"
                 f"{triple_id_part(new)}_{digest}")
    state.triples.append({"id": triple_id, "subject": subject,
                          "predicate": triple_id_part(predicate), "object": new,
                          "valid_from": at, "valid_to": None, "source_drawer_id": None,
                          "source_closet": None})
    return {"success": True, "triple_id": triple_id, "fact": _fact(subject, predicate, new),
            "superseded": args["old_object"]}


@tool("mempalace_kg_timeline")
def _kg_timeline(state: PalaceState, args: dict[str, Any]) -> dict[str, Any]:
    entity = args.get("entity")
    if entity is not None and (problem := argument_problem("entity", entity, "value")) is not None:
        return {"error": problem}
    entity = entity.strip() if entity is not None else None
    today = _today()
    # 3.11 answers an entity by the name it was first filed under (its key matches the rest)
    named = entity_names(state)
    rows = [{"subject": named[entity_key(t["subject"])], "predicate": t["predicate"],
             "object": named[entity_key(t["object"])],
             "valid_from": t.get("valid_from"), "valid_to": t.get("valid_to"),
             "current": _is_current(t, today),
             "id": t["id"]}
            for t in state.triples if entity is None
            or entity_key(entity) in (entity_key(t["subject"]), entity_key(t["object"]))]
    # 3.11: by valid_from (none last), then by triple id; entities matched by their key
    rows.sort(key=lambda row: (row["valid_from"] is None, row["valid_from"] or "", row["id"]))
    for row in rows:
        del row["id"]
    # 3.11 clamps the page size to 1..100
    limit = max(1, min(int(args.get("limit", 100)), 100))
    offset = max(0, int(args.get("offset", 0)))
    page = rows[offset:offset + limit]
    return {"entity": entity or "all", "timeline": page, "count": len(page), "total": len(rows),
            "offset": offset, "limit": limit}


@tool("mempalace_kg_stats")
def _kg_stats(state: PalaceState, args: dict[str, Any]) -> dict[str, Any]:
    today = _today()
    current = sum(1 for t in state.triples if _is_current(t, today))
    entities = {t["subject"] for t in state.triples} | {t["object"] for t in state.triples}
    return {"entities": len(entities), "triples": len(state.triples), "current_facts": current,
            "expired_facts": len(state.triples) - current,
            "relationship_types": sorted({t["predicate"] for t in state.triples})}


# --- the room graph ------------------------------------------------------------------------


def _wings_of_rooms(state: PalaceState) -> dict[str, dict[str, int]]:
    """room -> {wing: drawer count}."""
    rooms: dict[str, dict[str, int]] = {}
    for drawer in state.drawers:
        wings = rooms.setdefault(drawer["room"], {})
        wings[drawer["wing"]] = wings.get(drawer["wing"], 0) + 1
    return rooms


@tool("mempalace_traverse")
def _traverse(state: PalaceState, args: dict[str, Any]) -> Any:
    start = args["start_room"]
    if state.bare_database:  # 3.11 reads the room graph from chroma.sqlite3 itself: empty
        return {"error": f"Room '{start}' not found", "suggestions": []}
    if (missing := fresh(state, args)) is not None:
        return missing
    rooms = _wings_of_rooms(state)
    if start not in rooms:  # a list start_room: TypeError (unhashable), -32000 as in 3.11
        known = set(rooms) | {t[end]["room"] for t in state.tunnels for end in ("source",
                                                                                "target")}
        hits = sorted(r for r in known if start.lower() in r.lower())
        return {"error": f"Room '{start}' not found", "suggestions": hits}
    # 3.11's walk: breadth first over rooms sharing a wing, max_hops clamped to 1..10, each
    # room met once (with the wings it was reached through), then by hop and most rows first;
    # nodes come grouped by room from its sqlite reader (room order), halls from row metadata
    max_hops = max(1, min(int(args.get("max_hops", 2)), 10))
    halls, _ = _halls_and_dates(state)
    ordered = sorted(rooms.items())

    def node(room: str, hop: int) -> dict[str, Any]:
        return {"room": room, "wings": sorted(rooms[room]), "halls": sorted(halls.get(room, ())),
                "count": sum(rooms[room].values()), "hop": hop}

    found, visited, frontier = [node(start, 0)], {start}, [(start, 0)]
    while frontier:
        current, depth = frontier.pop(0)
        if depth >= max_hops:
            continue
        for room, wings in ordered:
            shared = set(rooms[current]) & set(wings)
            if room in visited or not shared:
                continue
            visited.add(room)
            found.append({**node(room, depth + 1), "connected_via": sorted(shared)})
            if depth + 1 < max_hops:
                frontier.append((room, depth + 1))
    found.sort(key=lambda entry: (entry["hop"], -entry["count"]))
    return found[:50]


@tool("mempalace_find_tunnels")
def _find_tunnels(state: PalaceState, args: dict[str, Any]) -> Any:
    for field in ("wing_a", "wing_b"):
        if (problem := optional_name(field, args.get(field))) is not None:
            return {"error": problem}
    if state.bare_database:  # read from chroma.sqlite3 itself, as traverse: no rooms
        return []
    if (missing := fresh(state, args)) is not None:
        return missing
    wanted = {w.strip() for w in (args.get("wing_a"), args.get("wing_b")) if w and w.strip()}
    # 3.11: a room filed in more than one wing, with the halls and latest date its rows carry
    # (a diary entry's hall_diary and date), most rows first, at most 50
    halls, dates = _halls_and_dates(state)
    found: list[dict[str, Any]] = [
        {"room": room, "wings": sorted(wings), "halls": sorted(halls.get(room, ())),
         "count": sum(wings.values()), "recent": max(dates.get(room, [""]))}
        for room, wings in sorted(_wings_of_rooms(state).items())
        if len(wings) > 1 and wanted <= set(wings)]
    found.sort(key=lambda tunnel: -tunnel["count"])
    return found[:50]


def _halls_and_dates(state: PalaceState) -> tuple[dict[str, set[str]], dict[str, list[str]]]:
    """Per room, the halls and dates its rows' metadata carry (3.11 files both on diary
    entries only)."""
    halls: dict[str, set[str]] = {}
    dates: dict[str, list[str]] = {}
    for drawer in state.drawers:
        if drawer["room"] == "diary" and "agent" in drawer:
            halls.setdefault(drawer["room"], set()).add("hall_diary")
            dates.setdefault(drawer["room"], []).append(drawer["created_at"][:10])
        elif drawer.get("hall"):
            halls.setdefault(drawer["room"], set()).add(drawer["hall"])
    return halls, dates


@tool("mempalace_graph_stats")
def _graph_stats(state: PalaceState, args: dict[str, Any]) -> dict[str, Any]:
    if (missing := fresh(state, args)) is not None:
        return missing
    rooms = _wings_of_rooms(state)
    per_wing: dict[str, int] = {}
    for wings in rooms.values():
        for wing in wings:
            per_wing[wing] = per_wing.get(wing, 0) + 1
    shared = sum(1 for wings in rooms.values() if len(wings) > 1)
    # 3.11: an edge per pair of a room's wings and per hall its rows carry (no hall, no edge);
    # the top tunnels are the rooms in the most wings, at most 10
    halls, _ = _halls_and_dates(state)
    edges = sum(len(wings) * (len(wings) - 1) // 2 * len(halls.get(room, ()))
                for room, wings in rooms.items())
    ranked = sorted(rooms.items(), key=lambda item: -len(item[1]))[:10]
    top = [{"room": room, "wings": sorted(wings), "count": sum(wings.values())}
           for room, wings in ranked if len(wings) >= 2]
    return {"total_rooms": len(rooms), "total_room_instances": sum(per_wing.values()),
            "tunnel_rooms": shared, "passive_tunnel_rooms": shared,
            "explicit_tunnels": len(state.tunnels), "total_edges": edges,
            "total_connections": edges + len(state.tunnels), "rooms_per_wing": per_wing,
            "top_tunnels": top}


_ENDS = ("source_wing", "source_room", "target_wing", "target_room")


def tunnel_id_of(source_wing: str, source_room: str, target_wing: str, target_room: str) -> str:
    """A tunnel's id as 3.11 makes it: the same for both directions (the two ``wing/room``
    ends in sorted order joined by ``↔``, SHA-256, 16 hex digits)."""
    ends = sorted((f"{source_wing}/{source_room}", f"{target_wing}/{target_room}"))
    return hashlib.sha256(f"{ends[0]}\u2194{ends[1]}".encode()).hexdigest()[:16]


@tool("mempalace_create_tunnel", writes=True)
def _create_tunnel(state: PalaceState, args: dict[str, Any]) -> dict[str, Any]:
    for field in _ENDS:
        if (problem := argument_problem(field, args[field], "name")) is not None:
            return {"error": problem}
    sw, sr, tw, tr = (args[field].strip() for field in _ENDS)
    # 3.11 opens the collection through chromadb's client to check the rooms: on a fresh
    # palace whose directory exists that makes a chroma.sqlite3 without its collection
    half_make(state)
    if state.initialised:  # a fresh palace has no rooms to check against, and 3.11 files it
        filed = {(d["wing"], d["room"]) for d in state.drawers}
        if (sw, sr) not in filed:
            return {"error": f"Source room '{sr}' does not exist in wing '{sw}'"}
        if (tw, tr) not in filed:
            return {"error": f"Target room '{tr}' does not exist in wing '{tw}'"}
    tunnel_id = tunnel_id_of(sw, sr, tw, tr)
    when = datetime.now(UTC).isoformat()
    tunnel = {"id": tunnel_id, "source": {"wing": sw, "room": sr},
              "target": {"wing": tw, "room": tr}, "label": args.get("label") or "",
              "kind": "explicit", "created_at": when, "strength": 1.0, "stability": 1.0,
              "last_activated": when, "access_count": 0}
    state.tunnels = [t for t in state.tunnels if t["id"] != tunnel_id] + [tunnel]
    return tunnel


@tool("mempalace_list_tunnels")
def _list_tunnels(state: PalaceState, args: dict[str, Any]) -> Any:
    wing = args.get("wing")
    if (problem := optional_name("wing", wing)) is not None:
        return {"error": problem}
    wing = wing.strip() if wing else None
    return [t for t in state.tunnels
            if wing in (None, t["source"]["wing"], t["target"]["wing"])]


@tool("mempalace_delete_tunnel", writes=True)
def _delete_tunnel(state: PalaceState, args: dict[str, Any]) -> dict[str, Any]:
    tunnel_id = args["tunnel_id"]
    if not isinstance(tunnel_id, str) or not tunnel_id.strip():
        return {"error": "tunnel_id is required"}
    state.tunnels = [t for t in state.tunnels if t["id"] != tunnel_id]
    return {"deleted": tunnel_id}  # 3.11 names the id whether or not it existed


@tool("mempalace_list_hallways")
def _list_hallways(state: PalaceState, args: dict[str, Any]) -> dict[str, Any]:
    if (problem := optional_name("wing", args.get("wing"))) is not None:
        return {"error": problem}
    # the fake never forms hallways (3.11 derives them from usage), so the list stays empty
    limit = min(max(1, int(args.get("limit", 100))), 500)  # 3.11 clamps to 1..500
    return {"hallways": [], "total": 0, "count": 0, "offset": max(0, int(args.get("offset", 0))),
            "limit": limit}


@tool("mempalace_delete_hallway", writes=True)
def _delete_hallway(state: PalaceState, args: dict[str, Any]) -> dict[str, Any]:
    hallway_id = args["hallway_id"]
    if not isinstance(hallway_id, str) or not hallway_id.strip():
        return {"error": "hallway_id is required"}
    return {"deleted": False}


#: what one follow adds to a tunnel's strength (3.11 records every follow)
FOLLOW_STRENGTH = 0.05


@tool("mempalace_follow_tunnels", writes=True)
def _follow_tunnels(state: PalaceState, args: dict[str, Any]) -> Any:
    for field in ("wing", "room"):
        if (problem := argument_problem(field, args[field], "name")) is not None:
            return {"error": problem}
    if (missing := fresh(state, args)) is not None:
        return missing
    here = {"wing": args["wing"].strip(), "room": args["room"].strip()}
    links = []
    for tunnel in state.tunnels:
        for direction, near, far in (("outgoing", "source", "target"),
                                     ("incoming", "target", "source")):
            if tunnel[near] == here:
                tunnel["access_count"] = tunnel.get("access_count", 0) + 1
                tunnel["strength"] = round(tunnel.get("strength", 1.0) + FOLLOW_STRENGTH, 6)
                tunnel["last_activated"] = datetime.now(UTC).isoformat()
                links.append({"direction": direction, "connected_wing": tunnel[far]["wing"],
                              "connected_room": tunnel[far]["room"], "label": tunnel["label"],
                              "drawer_id": None, "tunnel_id": tunnel["id"]})
                break
    return links
