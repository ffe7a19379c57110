"""The fake palace's drawer maintenance (bulk reads, deletes, updates, sync), its session tools
(hook settings, reconnect, the filed-away notice) and the task and patch tools of the event log,
as mempalace 3.11.0 answers them.

Argument checks and empty-palace answers are pinned to the truth table
(``fixtures/catalogue/mempalace-3.11.0-answers.json``). A path whose real answer was never seen
(an update that changes a drawer, a task that passes its checks, a sync over real source files)
answers with :func:`palace.unmodelled`, a result a test can see.
"""

from __future__ import annotations

import re
from typing import Any

from palace_conformance.fake.palace import (
    PalaceState,
    _chroma_missing,
    _problem,
    _refused,
    append_event,
    drawer_metadata,
    drawer_view,
    fresh,
    optional_name,
    store_artifact,
    tool,
    unmodelled,
)

_WORD = re.compile(r"\w+")
_HEX_COMMIT = re.compile(r"^[0-9a-fA-F]{7,64}$")
PATCH_NO_NEWLINE = ("patch content does not end with a trailing newline; git apply will reject "
                    "the final hunk as corrupt \u2014 store the diff byte-exactly including its "
                    "trailing newline")


def _find(state: PalaceState, drawer_id: Any) -> dict[str, Any] | None:
    return next((d for d in state.drawers if d["id"] == drawer_id), None)


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
    words = {w.lower() for w in _WORD.findall(content)}
    matches = []
    for drawer in state.drawers:  # word overlap stands in for vector similarity
        theirs = {w.lower() for w in _WORD.findall(drawer["content"])}
        similarity = (1.0 if drawer["content"] == content
                      else round(len(words & theirs) / max(len(words | theirs), 1), 3))
        if similarity >= threshold:
            matches.append({"id": drawer["id"], "wing": drawer["wing"], "room": drawer["room"],
                            "similarity": similarity, "content": drawer["content"]})
    return {"is_duplicate": bool(matches), "matches": matches}


@tool("mempalace_delete_drawer", writes=True)
def _delete_drawer(state: PalaceState, args: dict[str, Any]) -> dict[str, Any]:
    if (missing := fresh(state, args)) is not None:
        return missing
    drawer_id = args["drawer_id"]
    if not isinstance(drawer_id, str):
        return {"success": False, "error": f"Expected ID to be a str, got {drawer_id!r} in get."}
    if _find(state, drawer_id) is None:
        return {"success": False, "error": f"Drawer not found: {drawer_id}"}
    state.drawers = [d for d in state.drawers if d["id"] != drawer_id]
    return {"success": True, "drawer_id": drawer_id, "deleted_ids": [drawer_id],
            "chunks_deleted": 1, "closets_deleted": 0}


@tool("mempalace_delete_drawers", writes=True)
def _delete_drawers(state: PalaceState, args: dict[str, Any]) -> dict[str, Any]:
    if (refused := _id_list(args["drawer_ids"])) is not None:
        return refused
    if (missing := fresh(state, args)) is not None:
        return missing
    results = []
    for drawer_id in args["drawer_ids"]:
        if _find(state, drawer_id) is None:
            results.append({"drawer_id": drawer_id, "error": f"Drawer not found: {drawer_id}"})
        else:  # approximated: the per-item shape of a deleted drawer was not captured
            state.drawers = [d for d in state.drawers if d["id"] != drawer_id]
            results.append({"drawer_id": drawer_id, "success": True})
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
        drawer = _find(state, drawer_id)
        if drawer is None:
            results.append({"drawer_id": drawer_id, "error": f"Drawer not found: {drawer_id}"})
        else:
            results.append(drawer_view(drawer))
    return {"results": results, "count": len(results),
            "errors": sum(1 for r in results if "error" in r)}


@tool("mempalace_list_drawers")
def _list_drawers(state: PalaceState, args: dict[str, Any]) -> dict[str, Any]:
    for field in ("wing", "room"):
        if (problem := optional_name(field, args.get(field))) is not None:
            return {"error": problem}
    for field in ("since", "before"):  # 3.11 strips them too: a list raises (-32000)
        if args.get(field) is not None:
            args[field].strip()
    if (missing := fresh(state, args)) is not None:
        return missing
    wing = (args.get("wing") or "").strip()
    room = (args.get("room") or "").strip()
    drawers = [d for d in state.drawers
               if wing in ("", d["wing"]) and room in ("", d["room"])]
    limit, offset = max(0, int(args.get("limit", 20))), max(0, int(args.get("offset", 0)))
    page = [{"drawer_id": d["id"], "wing": d["wing"], "room": d["room"],
             "content_preview": d["content"][:200], "metadata": drawer_metadata(d)}
            for d in drawers[offset:offset + limit]]
    return {"drawers": page, "total": len(drawers), "count": len(page), "offset": offset,
            "limit": limit}


@tool("mempalace_update_drawer", writes=True)
def _update_drawer(state: PalaceState, args: dict[str, Any]) -> dict[str, Any]:
    if all(args.get(field) is None for field in ("content", "wing", "room")):
        # 3.11 answers a no-op before looking anything up, whatever the id
        return {"success": True, "drawer_id": args["drawer_id"], "noop": True}
    if (missing := fresh(state, args)) is not None:
        return missing
    if not any(d["id"] == args["drawer_id"] for d in state.drawers):
        return {"success": False, "error": f"Drawer not found: {args['drawer_id']}"}
    return unmodelled("mempalace_update_drawer with changes")


@tool("mempalace_delete_by_source", writes=True)
def _delete_by_source(state: PalaceState, args: dict[str, Any]) -> dict[str, Any]:
    source = args["source_file"]
    if not isinstance(source, str) or not source.strip():
        return {"success": False, "error": "source_file must be a non-empty string"}
    if (missing := fresh(state, args)) is not None:
        return missing
    if any(d.get("source_file") == source for d in state.drawers):
        return unmodelled("mempalace_delete_by_source over matching drawers")
    return {"success": True, "dry_run": bool(args.get("dry_run", True)), "source_file": source,
            "match_count": 0, "closet_match_count": 0, "sample": [],
            "hint": "No drawers match this source_file."}


@tool("mempalace_sync", writes=True)
def _sync(state: PalaceState, args: dict[str, Any]) -> dict[str, Any]:
    project = args.get("project_dir")
    if project is not None and not isinstance(project, str):
        return {"success": False, "error": "sync failed: expected str, bytes or os.PathLike "
                                           f"object, not {type(project).__name__}"}
    if not state.initialised:
        # 3.11 creates a chroma database it cannot open afterwards; not modelled
        return unmodelled("mempalace_sync on a fresh palace")
    if project or args.get("apply") or any(d.get("source_file", "?") != "?"
                                           for d in state.drawers):
        return unmodelled("mempalace_sync over source files")
    return {"success": True, "scanned": len(state.drawers), "kept": 0, "gitignored": 0,
            "missing": 0, "unresolved": 0, "no_source": len(state.drawers), "out_of_scope": 0,
            "removed_drawers": 0, "removed_closets": 0, "dry_run": True, "by_source": {},
            "unresolved_by_source": {}}


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
        missing = _chroma_missing(args["__palace__"])
        return {"success": False, "message": missing["error"], "details": missing["details"],
                "hint": missing["hint"], "drawers": 0, "vector_disabled": False}
    return {"success": True, "message": "Reconnected to palace", "drawers": len(state.drawers),
            "vector_disabled": False, "vector_disabled_reason": ""}


# --- tasks and patches ---------------------------------------------------------------------


@tool("mempalace_task_create", writes=True)
def _task_create(state: PalaceState, args: dict[str, Any]) -> dict[str, Any]:
    project = args["project"]
    if not isinstance(project, str) or not project.strip():
        return {"success": False, "error": "task project must not be empty"}
    commit = args["base_commit"]
    if not isinstance(commit, str) or not _HEX_COMMIT.match(commit.strip()):
        return {"success": False, "error": "task base commit must be a hexadecimal Git object "
                                           "id (at least 7 characters), not a branch or tag"}
    return unmodelled("mempalace_task_create past its argument checks")


@tool("mempalace_patch_submit", writes=True)
def _patch_submit(state: PalaceState, args: dict[str, Any]) -> dict[str, Any]:
    if (problem := _problem("created_by", args["from_agent"], "text")) is not None:
        return {"success": False, "error": problem}
    refused = _refused(("stream", args["stream"], "text"),
                       ("room", args.get("room", "patches"), "text"))
    if refused is not None:
        return refused
    content = args["content"]
    if not isinstance(content, str) or not content.strip():
        return {"success": False, "error": "content must be a non-empty string"}
    extra = {} if content.endswith("\n") else {"warnings": [PATCH_NO_NEWLINE]}
    artifact = store_artifact(state, "patch", content, args["from_agent"], args.get("metadata"),
                              extra)
    event = append_event(state, {
        "type": "patch.ready", "stream": args["stream"], "room": args.get("room", "patches"),
        "topic": args.get("topic"), "from_agent": args["from_agent"],
        "to_agent": args.get("to_agent"), "correlation_id": args.get("correlation_id"),
        "branch": args.get("branch"), "base_commit": args.get("base_commit"),
        "status": "ready", "artifact_ids": [artifact["id"]], "body": args.get("body"),
        "metadata": args.get("metadata")})
    return {"success": True, "artifact": artifact, "event": event}

