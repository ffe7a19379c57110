"""The fake palace's drawer maintenance (bulk reads, deletes, updates), its session tools
(hook settings, reconnect, the filed-away notice) and the task and patch tools of the event log,
as mempalace 3.11.0 answers them.

Argument checks and empty-palace answers are pinned to the truth table
(``fixtures/catalogue/mempalace-3.11.0-answers.json``). ``mempalace_sync`` is
:mod:`.palace_sync`'s.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from palace_conformance.fake.palace import (
    CHUNK_SIZE,
    PalaceState,
    append_event,
    artifact_problem,
    backend_open_failed,
    chunk_rows,
    drawer_view,
    event_problem,
    fresh,
    listed_drawers,
    logical_rows,
    make_directory,
    optional_name,
    store_artifact,
    tool,
)
from palace_conformance.fake.palace_checks import (
    argument_problem,
    chroma_missing,
    date_window,
    digest,
    in_window,
)
from palace_conformance.fake.vectors import cosine_similarity, embed

_HEX_COMMIT = re.compile(r"^[0-9a-fA-F]{7,64}$")
PATCH_NO_NEWLINE = ("patch content does not end with a trailing newline; git apply will reject "
                    "the final hunk as corrupt \u2014 store the diff byte-exactly including its "
                    "trailing newline")


def _find(state: PalaceState, drawer_id: Any) -> dict[str, Any] | None:
    return next((d for d in state.drawers if d["id"] == drawer_id), None)


def _lookup_problem(drawer_id: Any) -> str | None:
    """3.11 looks a batch's ids up in a dict: a list or object among them is unhashable."""
    if isinstance(drawer_id, (list, dict)):
        return f"unhashable type: '{type(drawer_id).__name__}'"
    return None


def _id_list(value: Any) -> dict[str, Any] | None:
    if not isinstance(value, list):
        return {"error": "drawer_ids must be a list of drawer IDs"}
    if not value:
        return {"error": "drawer_ids must not be empty"}
    return None


@tool("mempalace_check_duplicate")
def _check_duplicate(state: PalaceState, args: dict[str, Any]) -> dict[str, Any]:
    if (missing := fresh(state, args)) is not None:
        return missing
    content = args["content"]
    if not isinstance(content, str):
        return {"error": "Duplicate check failed"}
    threshold = float(args.get("threshold", 0.9))
    # 3.11 asks the vector index for the 5 nearest rows (chunks too) and keeps those whose
    # similarity, rounded to 3 places, reaches the threshold, nearest first; the vectors are
    # the kit's embedder's, the ones the real server gets from the kit's stub
    # nearest first by the unrounded similarity, as the index orders its distances: rows
    # whose rounded similarities tie keep the index's order, not the filing order
    query = embed(content)
    nearest = sorted(((cosine_similarity(query, embed(d["content"])), i, d)
                      for i, d in enumerate(state.drawers)), key=lambda hit: (-hit[0], hit[1]))
    matches = []
    for exact, _, drawer in nearest[:5]:
        similarity = round(exact, 3)
        if similarity >= threshold:
            text = drawer["content"]
            matches.append({"id": drawer["id"], "wing": drawer["wing"], "room": drawer["room"],
                            "similarity": similarity,
                            "content": text[:200] + "..." if len(text) > 200 else text})
    return {"is_duplicate": bool(matches), "matches": matches}


@tool("mempalace_delete_drawer", writes=True)
def _delete_drawer(state: PalaceState, args: dict[str, Any]) -> dict[str, Any]:
    if (missing := fresh(state, args)) is not None:
        return missing
    drawer_id = args["drawer_id"]
    if not isinstance(drawer_id, str):
        return {"success": False, "error": f"Expected ID to be a str, got {drawer_id!r} in get."}
    deleted = _delete_logical(state, drawer_id)
    if deleted is None:
        return {"success": False, "error": f"Drawer not found: {drawer_id}"}
    return {"success": True, **deleted}


def _delete_logical(state: PalaceState, drawer_id: Any) -> dict[str, Any] | None:
    """Delete the rows a drawer id names (a logical id: all its chunks); 3.11's account of
    it, or None when it names nothing."""
    rows = logical_rows(state, drawer_id)
    if not rows:
        return None
    gone = {row["id"] for row in rows}
    state.drawers = [d for d in state.drawers if d["id"] not in gone]
    return {"drawer_id": drawer_id, "deleted_ids": [row["id"] for row in rows],
            "chunks_deleted": len(rows), "closets_deleted": 0}


@tool("mempalace_delete_drawers", writes=True)
def _delete_drawers(state: PalaceState, args: dict[str, Any]) -> dict[str, Any]:
    if (refused := _id_list(args["drawer_ids"])) is not None:
        return refused
    if (missing := fresh(state, args)) is not None:
        return missing
    # 3.11 resolves every id first, then deletes each: an id given twice is deleted twice
    resolved = {drawer_id: logical_rows(state, drawer_id) for drawer_id in args["drawer_ids"]
                if _lookup_problem(drawer_id) is None and isinstance(drawer_id, str)}
    results = []
    for drawer_id in args["drawer_ids"]:
        rows = resolved.get(drawer_id) if isinstance(drawer_id, str) else None
        if (problem := _lookup_problem(drawer_id)) is not None:
            results.append({"drawer_id": drawer_id, "error": problem})
        elif not rows:
            results.append({"drawer_id": drawer_id, "error": f"Drawer not found: {drawer_id}"})
        else:  # 3.11's per-item shape: the singular delete's answer without success
            gone = {row["id"] for row in rows}
            state.drawers = [d for d in state.drawers if d["id"] not in gone]
            results.append({"drawer_id": drawer_id, "deleted_ids": [row["id"] for row in rows],
                            "chunks_deleted": len(rows), "closets_deleted": 0})
    failed = sum(1 for r in results if "error" in r)
    return {"results": results, "count": len(results), "deleted": len(results) - failed,
            "errors": failed}


@tool("mempalace_get_drawers")
def _get_drawers(state: PalaceState, args: dict[str, Any]) -> dict[str, Any]:
    if (refused := _id_list(args["drawer_ids"])) is not None:
        return refused
    if (missing := fresh(state, args)) is not None:
        return missing
    results: list[dict[str, Any]] = []
    for drawer_id in args["drawer_ids"]:
        if (problem := _lookup_problem(drawer_id)) is not None:
            results.append({"drawer_id": drawer_id, "error": problem})
            continue
        rows = logical_rows(state, drawer_id)
        if not rows:
            results.append({"drawer_id": drawer_id, "error": f"Drawer not found: {drawer_id}"})
        else:
            results.append(drawer_view(drawer_id, rows))
    return {"results": results, "count": len(results),
            "errors": sum(1 for r in results if "error" in r)}


@tool("mempalace_list_drawers")
def _list_drawers(state: PalaceState, args: dict[str, Any]) -> dict[str, Any]:
    for field in ("wing", "room"):
        if (problem := optional_name(field, args.get(field))) is not None:
            return {"error": problem}
    window = date_window(args)
    if isinstance(window, str):
        return {"error": window}
    since, before = window
    if (missing := fresh(state, args)) is not None:
        return missing
    wing = (args.get("wing") or "").strip()
    room = (args.get("room") or "").strip()
    # 3.11: rows collapsed into logical drawers, by drawer id, then the window
    drawers = [d for d in listed_drawers([d for d in state.drawers
                                          if wing in ("", d["wing"]) and room in ("", d["room"])])
               if in_window(d["metadata"]["filed_at"], since, before)]
    # 3.11 clamps the page size to 1..100 (limit 0 or -1 lists one drawer)
    limit = max(1, min(int(args.get("limit", 20)), 100))
    offset = max(0, int(args.get("offset", 0)))
    page = drawers[offset:offset + limit]
    return {"drawers": page, "total": len(drawers), "count": len(page), "offset": offset,
            "limit": limit}


@tool("mempalace_update_drawer", writes=True)
def _update_drawer(state: PalaceState, args: dict[str, Any]) -> dict[str, Any]:
    if all(args.get(field) is None for field in ("content", "wing", "room")):
        # 3.11 answers a no-op before looking anything up, whatever the id
        return {"success": True, "drawer_id": args["drawer_id"], "noop": True}
    if (missing := fresh(state, args)) is not None:
        return missing
    if not isinstance(args["drawer_id"], str):  # chroma's complaint, as 3.11 passes it on
        return {"success": False,
                "error": f"Expected ID to be a str, got {args['drawer_id']!r} in get."}
    drawer_id = args["drawer_id"]
    rows = logical_rows(state, drawer_id)
    if not rows:
        return {"success": False, "error": f"Drawer not found: {drawer_id}"}
    return _update_rows(state, drawer_id, rows, args)


def _update_rows(state: PalaceState, drawer_id: str, rows: list[dict[str, Any]],
                 args: dict[str, Any]) -> dict[str, Any]:
    """3.11's update of a found drawer: content, then wing, then room checked; the drawer
    re-chunked when it was chunked or its new content is past the chunk size, else its one
    row changed in place (its id kept either way)."""
    content = "".join(row["content"] for row in rows)
    if args.get("content") is not None:
        if (problem := argument_problem("content", args["content"], "content")) is not None:
            return {"success": False, "error": problem}
        content = args["content"]
    first = dict(rows[0])
    for field in ("wing", "room"):
        if args.get(field) is not None:
            if (problem := argument_problem(field, args[field], "name")) is not None:
                return {"success": False, "error": problem}
            first[field] = args[field].strip()
    first["modified_at"] = datetime.now().isoformat()
    fields = {k: v for k, v in first.items()
              if k not in ("id", "content", "parent", "chunk_index")}
    chunked = rows[0]["id"] != drawer_id or len(content) > CHUNK_SIZE
    if chunked:
        new = [{**row, "parent": drawer_id} for row in chunk_rows(drawer_id, content, fields)]
        if len(new) == 1 and new[0]["id"] == drawer_id:  # 3.11 keeps a chunk id for one
            new = [{**new[0], "id": f"{drawer_id}_chunk_000000", "chunk_index": 0}]
    else:
        new = [{"id": drawer_id, **fields, "content": content}]
    gone = {row["id"] for row in rows}
    at = next(i for i, d in enumerate(state.drawers) if d["id"] in gone)
    kept = [d for d in state.drawers if d["id"] not in gone]
    state.drawers = kept[:at] + new + kept[at:]
    answer = {"success": True, "drawer_id": drawer_id, "wing": first["wing"],
              "room": first["room"]}
    if chunked:
        answer.update({"chunks": len(new), "chunk_ids": [row["id"] for row in new]})
    return {**answer, "closets_deleted": 0}


@tool("mempalace_delete_by_source", writes=True)
def _delete_by_source(state: PalaceState, args: dict[str, Any]) -> dict[str, Any]:
    source = args["source_file"]
    if not isinstance(source, str) or not source.strip():
        return {"success": False, "error": "source_file must be a non-empty string"}
    if (missing := fresh(state, args)) is not None:
        return missing
    matches = [d for d in state.drawers if d.get("source_file") == source]
    sample: list[dict[str, Any]] = []
    for drawer in matches:  # 3.11: the distinct (wing, room) pairs, at most 5
        place = {"wing": drawer["wing"], "room": drawer["room"]}
        if place not in sample and len(sample) < 5:
            sample.append(place)
    count = len(matches)
    closets = sum(int(d.get("closets", 0)) for d in matches)  # a mined file's closet
    if args.get("dry_run", True):
        return {"success": True, "dry_run": True, "source_file": source, "match_count": count,
                "closet_match_count": closets, "sample": sample,
                "hint": (f"No drawers were deleted. Re-run with dry_run=false to remove these "
                         f"{count} drawer(s) and {closets} index entr(y/ies)." if count
                         else "No drawers match this source_file.")}
    if not count:
        return {"success": True, "dry_run": False, "source_file": source, "deleted": 0}
    state.drawers = [d for d in state.drawers if d.get("source_file") != source]
    return {"success": True, "dry_run": False, "source_file": source, "deleted": count,
            "closets_deleted": closets}


# --- the session's own tools ----------------------------------------------------------------


@tool("mempalace_hook_settings", writes=True)
def _hook_settings(state: PalaceState, args: dict[str, Any]) -> dict[str, Any]:
    updated = []
    for key in ("silent_save", "desktop_toast"):
        if args.get(key) is not None:  # 3.11 stores what it is given, a non-boolean too
            state.hook_settings[key] = args[key]
            updated.append(f"{key} \u2192 {_python_text(args[key])}")
    answer: dict[str, Any] = {"success": True, "settings": dict(state.hook_settings)}
    if updated:
        answer["updated"] = updated
    return answer


def _python_text(value: Any) -> str:
    """``value`` as 3.11's f-string prints it (Python's ``True``, not JSON's ``true``)."""
    return str(value) if not isinstance(value, bool | type(None)) else repr(value)


@tool("mempalace_memories_filed_away")
def _memories_filed_away(state: PalaceState, args: dict[str, Any]) -> dict[str, Any]:
    # the fake keeps no hook journal, so nothing was ever filed away by a hook
    return {"status": "quiet", "message": "No recent journal entry", "count": 0,
            "timestamp": None}


@tool("mempalace_reconnect")
def _reconnect(state: PalaceState, args: dict[str, Any]) -> dict[str, Any]:
    if not state.initialised:
        missing = (backend_open_failed() if state.bare_database
                   else chroma_missing(args["__palace__"]))
        return {"success": False, "message": missing["error"], "details": missing["details"],
                "hint": missing["hint"], "drawers": 0, "vector_disabled": False}
    return {"success": True, "message": "Reconnected to palace", "drawers": len(state.drawers),
            "vector_disabled": False, "vector_disabled_reason": ""}


# --- tasks and patches ---------------------------------------------------------------------


TASK_DELIVERY = ("Delivery:\nClose the loop through MemPalace: claim the request, then submit a "
                 "patch with mempalace_patch_submit or reply with blocked/failed evidence.")


def task_slug(text: str, fallback: str) -> str:
    """A task's routing label as 3.11 makes it: lower case, every run of other characters than
    ``a-z0-9`` as one ``_``, at most 40 characters, ``fallback`` when nothing is left."""
    slug = re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")
    return slug[:40].rstrip("_") or fallback


def _task_text(value: Any, what: str) -> str | dict[str, Any]:
    """``value`` stripped, or 3.11's refusal of a blank or non-string task field."""
    if not isinstance(value, str) or not value.strip():
        return {"success": False, "error": f"task {what} must not be empty"}
    return value.strip()


@tool("mempalace_task_create", writes=True)
def _task_create(state: PalaceState, args: dict[str, Any]) -> dict[str, Any]:
    make_directory(state)  # 3.11 opens the event log before it checks anything
    fields: dict[str, str] = {}
    # 3.11's order: project, the two agents, the branch, the commit, then goal and done
    for key, what in (("project", "project"), ("from_agent", "requesting agent"),
                      ("to_agent", "destination agent"), ("branch", "branch"),
                      ("base_commit", "base commit")):
        checked = _task_text(args[key], what)
        if isinstance(checked, dict):
            return checked
        fields[key] = checked
    if not _HEX_COMMIT.match(fields["base_commit"]):
        return {"success": False, "error": "task base commit must be a hexadecimal Git object "
                                           "id (at least 7 characters), not a branch or tag"}
    for key, what in (("goal", "goal"), ("done", "definition of done")):
        if not isinstance(args[key], str) or not args[key].strip():
            return {"success": False, "error": f"task {what} must not be empty"}
    goal, done = args["goal"], args["done"]  # kept as given in the body
    seq = max((e["seq"] for e in state.events), default=0) + 1
    # 3.11 adds 8 random hex digits; the fake derives them, like its event ids
    correlation_id = f"task_{task_slug(goal, 'work')}_{digest(str(seq), goal, size=8)}"
    event = append_event(state, {
        "type": "task.request", "stream": f"project/{task_slug(fields['project'], 'project')}",
        "room": "delegation", "from_agent": fields["from_agent"], "to_agent": fields["to_agent"],
        "correlation_id": correlation_id, "branch": fields["branch"],
        "base_commit": fields["base_commit"].lower(), "status": "open",
        "body": f"Goal:\n{goal}\n\nDefinition of done:\n{done}\n\n{TASK_DELIVERY}"})
    return {"success": True, "task": event,
            "handoff": f"Open MemPalace task {correlation_id} as {fields['to_agent']}. Claim it, "
                       "follow its exact definition of done, and deliver through the logstream."}


@tool("mempalace_patch_submit", writes=True)
def _patch_submit(state: PalaceState, args: dict[str, Any]) -> dict[str, Any]:
    make_directory(state)
    # 3.11 stores the artifact (its checks first), then appends the event through the same
    # checks as any event: a refused event leaves the artifact filed
    content, metadata = args["content"], args.get("metadata")
    created_by, problem = artifact_problem("patch", args["from_agent"], content, metadata)
    if problem is not None:
        return {"success": False, "error": problem}
    extra = {} if content.endswith("\n") else {"warnings": [PATCH_NO_NEWLINE]}
    artifact = store_artifact(state, "patch", content, created_by, metadata, extra)
    ready = {"type": "patch.ready", "stream": args["stream"], "room": args.get("room", "patches"),
             "topic": args.get("topic"), "from_agent": args["from_agent"],
             "to_agent": args.get("to_agent"), "correlation_id": args.get("correlation_id"),
             "branch": args.get("branch"), "base_commit": args.get("base_commit"),
             "status": "ready", "artifact_ids": [artifact["id"]], "body": args.get("body"),
             "metadata": metadata}
    if (problem := event_problem(state, ready)) is not None:
        return {"success": False, "error": problem}
    event = append_event(state, ready)
    return {"success": True, "artifact": artifact, "event": event}

