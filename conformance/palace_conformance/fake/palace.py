"""The fake palace's contents and the tool handlers that read and change them.

All 47 tools of mempalace 3.11.0 answer as the real server did to the probes of the truth table
(``fixtures/catalogue/mempalace-3.11.0-answers.json``, ``palace-conformance fake catalog``):
argument checks, fresh, empty and populated palaces. This module holds the palace, the overview,
drawer, search, mine, diary, knowledge-graph core and event-log tools; ``palace_graph`` and
``palace_records`` the rest (registered on first use). Deterministic (no embeddings: search is a
word overlap score) and persistable to a JSON file so that a respawned child sees what its
predecessor wrote, as a real on-disk palace would.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import os
import re
import time
from collections.abc import Callable, Iterator, Mapping

from palace_conformance.fake.palace_checks import (
    argument_problem,
    checked_fact,
    chroma_missing,
    date_window,
    digest,
    in_window,
    refusal,
    sha256_hex,
    stripped,
    temporal,
)
from palace_conformance.fake.search_query import clean_query

TYPE_CHECKING = False  # typing.TYPE_CHECKING, unimported: pyproject.toml's helper-start contracts

if TYPE_CHECKING:  # imported where used: pathlib costs every fake's start about 5 ms, and
    from datetime import datetime  # datetime and hashlib (sha256_hex) about 6 ms more
    from pathlib import Path
    from typing import Any

VERSION = "3.11.0"
EVENT_STATUSES = ("applied", "blocked", "claimed", "failed", "open", "ready", "superseded")
ARTIFACT_KINDS = ("file", "json", "log", "note", "patch")
#: what 3.11's event_list adds when given from_agent (which does not filter) without writer
EVENT_LIST_NOTE = ("from_agent is your identity and does not filter event_list/event_wait. Filter "
                   "by who wrote an event with writer=<agent>; for your inbox use to_agent=<you>.")
SQLITE_VERSION = "3.40.1"
CHROMA_VERSION = "1.5.9"
PROTOCOL_TEXT = (
    "IMPORTANT \u2014 MemPalace Memory Protocol:\n"
    "1. ON WAKE-UP: Call mempalace_status to load palace overview + AAAK spec.\n"
    "2. BEFORE RESPONDING about any person, project, or past event: verify with the palace.\n"
    "3. IF UNSURE about a fact: say \"let me check\" and query the palace.\n"
    "4. AFTER EACH SESSION: call mempalace_diary_write to record what happened.\n"
    "(fake palace: abridged protocol text)"
)
#: what 3.11's hook_settings answers before anything was set
HOOK_SETTINGS = {"silent_save": True, "desktop_toast": False}
AAAK_TEXT = ("AAAK is a compressed memory dialect that MemPalace uses for efficient storage.\n"
             "(abridged)")


def _now() -> datetime:
    from datetime import UTC, datetime

    return datetime.now(UTC).replace(tzinfo=None)


def new_replica_id() -> str:
    """A palace's replica id as 3.11 mints it: ``rep_`` and 32 random hex digits."""
    return f"rep_{os.urandom(16).hex()}"  # secrets.token_hex(16), without importing secrets


def _name_of(path: str) -> str:
    """``pathlib.Path(path).name`` on POSIX: the last part that is not ``.`` (``""`` for none),
    without importing pathlib; a non-string raises TypeError, as ``Path`` does."""
    if not isinstance(path, str):
        raise TypeError(f"expected str, bytes or os.PathLike object, not {type(path).__name__}")
    parts = [part for part in path.split("/") if part and part != "."]
    return parts[-1] if parts else ""


def replica_id_for(path: str | os.PathLike[str]) -> str:
    """A stable replica id for a state file written without one (the same in every process)."""
    return f"rep_{sha256_hex(os.path.abspath(path))[:32]}"


class PalaceState:
    """Everything a palace holds. Plain data, so it round-trips through JSON.

    ``initialised`` is false for a fresh palace: mempalace 3.11 has no chroma database until the
    first vector write, and until then the tools that open it answer "missing" results (see
    :func:`fresh`). ``directory`` says whether 3.11 would have made the palace directory yet (the
    event log and ``mesh_peers`` make it, as does the first vector write); ``bare_database`` is
    the half-made state a ``search`` or ``sync`` leaves on a fresh palace whose directory exists:
    a ``chroma.sqlite3`` without its collection (see :func:`fresh`, :func:`half_make`).
    ``replica`` is the palace's own ``origin_replica`` (random per palace)."""

    def __init__(self, drawers: list[dict[str, Any]] | None = None,
                 triples: list[dict[str, Any]] | None = None,
                 events: list[dict[str, Any]] | None = None,
                 artifacts: list[dict[str, Any]] | None = None,
                 initialised: bool = True, replica: str | None = None,
                 tunnels: list[dict[str, Any]] | None = None,
                 hook_settings: dict[str, Any] | None = None,
                 directory: bool | None = None, bare_database: bool = False) -> None:
        self.drawers: list[dict[str, Any]] = drawers if drawers is not None else []
        self.triples: list[dict[str, Any]] = triples if triples is not None else []
        self.events: list[dict[str, Any]] = events if events is not None else []
        self.artifacts: list[dict[str, Any]] = artifacts if artifacts is not None else []
        self.tunnels: list[dict[str, Any]] = tunnels if tunnels is not None else []
        self.hook_settings: dict[str, Any] = (hook_settings if hook_settings is not None
                                              else dict(HOOK_SETTINGS))
        self.initialised = initialised
        self.bare_database = bare_database and not initialised
        #: an initialised palace, or one holding events, has its directory
        self.directory = (initialised or bool(self.events) or self.bare_database
                          if directory is None else directory)
        self.replica = replica or new_replica_id()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PalaceState) and self.to_json() == other.to_json()

    __hash__ = None  # type: ignore[assignment]

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PalaceState:
        state = cls(
            drawers=list(data.get("drawers", [])),
            triples=list(data.get("triples", [])),
            events=list(data.get("events", [])),
            artifacts=list(data.get("artifacts", [])),
            initialised=bool(data.get("initialised", True)),
            replica=data.get("replica") if isinstance(data.get("replica"), str) else None,
            tunnels=list(data.get("tunnels", [])),
            hook_settings=(dict(data["hook_settings"]) if isinstance(data.get("hook_settings"),
                                                                     dict) else None),
            directory=(bool(data["directory"]) if isinstance(data.get("directory"), bool)
                       else None),
            bare_database=bool(data.get("bare_database", False)),
        )
        for entry in data.get("diary", []):
            state.drawers.append(_diary_drawer(entry["agent_name"], entry["entry"],
                                               entry.get("topic", "general"), entry.get("wing"),
                                               entry.get("timestamp")))
        return state

    def to_json(self) -> dict[str, Any]:
        return {"initialised": self.initialised, "directory": self.directory,
                "bare_database": self.bare_database, "replica": self.replica,
                "drawers": self.drawers, "triples": self.triples, "events": self.events,
                "artifacts": self.artifacts, "tunnels": self.tunnels,
                "hook_settings": self.hook_settings}


def _diary_drawer(agent: str, entry: str, topic: str, wing: str | None,
                  timestamp: str | None = None) -> dict[str, Any]:
    from datetime import datetime

    when = datetime.fromisoformat(timestamp) if timestamp else _now()
    agent = agent.strip().lower()  # 3.11 files (and reads) diaries under the lower-cased name
    wing = wing.strip() if wing else default_diary_wing(agent)
    stamp = when.strftime("%Y%m%d_%H%M%S%f")
    return {
        "id": f"diary_{wing}_{stamp}_{sha256_hex(entry)[:12]}",
        "wing": wing, "room": "diary", "content": entry, "topic": topic, "agent": agent,
        "added_by": agent, "source_file": "?", "created_at": when.isoformat(),
    }


def drawer_metadata(drawer: dict[str, Any]) -> dict[str, Any]:
    """The metadata 3.11 shows of one stored row (get_drawer, list_drawers): a diary entry's,
    or a filed drawer's, keys sorted as 3.11 stores them; a chunk names its logical drawer
    (``parent_drawer_id``; a diary chunk also ``parent_entry_id``) and its index; a source
    file is shown by its name only."""
    index = drawer.get("chunk_index", 0)
    parent = drawer.get("parent")
    if drawer["room"] == "diary" and "agent" in drawer:
        meta = {"agent": drawer["agent"], "chunk_index": index, "date": drawer["created_at"][:10],
                "filed_at": drawer["created_at"], "hall": "hall_diary",
                "last_modified": drawer["created_at"]}
        if parent is not None:
            meta.update({"parent_drawer_id": parent, "parent_entry_id": parent})
        return {**meta, "room": "diary", "topic": drawer.get("topic", "general"),
                "type": "diary_entry", "wing": drawer["wing"]}
    source = drawer.get("source_file", "?")
    meta = {"added_by": drawer.get("added_by"), "chunk_index": index,
            "filed_at": drawer["created_at"], "id_recipe": "v3",
            "last_modified": drawer.get("modified_at", drawer["created_at"])}
    meta.update({key: drawer[key] for key in MINED_KEYS if key in drawer})
    if parent is not None:
        meta["parent_drawer_id"] = parent
    return dict(sorted({**meta, "room": drawer["room"],
                        "source_file": "" if source == "?" else _name_of(source),
                        "wing": drawer["wing"]}.items()))


#: what 3.11's miner files on a mined file's rows besides an added drawer's metadata
MINED_KEYS = ("chunk_total", "content_date", "content_date_source", "hall", "line_end",
              "line_start", "normalize_version", "source_mtime")
#: 3.11's default hall keywords (its config's ``hall_keywords``): a mined row's hall is the one
#: with the most keywords in its first 3,000 characters (the first such on a tie), else general
HALL_KEYWORDS: dict[str, tuple[str, ...]] = {
    "emotions": ("scared", "afraid", "worried", "happy", "sad", "love", "hate", "feel", "cry",
                 "tears"),
    "consciousness": ("consciousness", "conscious", "aware", "real", "genuine", "soul", "exist",
                      "alive"),
    "memory": ("memory", "remember", "forget", "recall", "archive", "palace", "store"),
    "technical": ("code", "python", "script", "bug", "error", "function", "api", "database",
                  "server"),
    "identity": ("identity", "name", "who am i", "persona", "self"),
    "family": ("family", "kids", "children", "daughter", "son", "parent", "mother", "father"),
    "creative": ("game", "gameplay", "player", "app", "design", "art", "music", "story"),
}


def detect_hall(content: str) -> str:
    """3.11's ``detect_hall``: keyword counts (substrings of the lower-cased text)."""
    text = content[:3000].lower()
    scores = {hall: sum(1 for word in words if word in text)
              for hall, words in HALL_KEYWORDS.items()}
    best = max(scores.values())
    return next(hall for hall, score in scores.items() if score == best) if best else "general"


def logical_rows(state: PalaceState, drawer_id: Any) -> list[dict[str, Any]]:
    """The stored rows a drawer id names, as 3.11 resolves it: the row of that id, else the
    chunks whose logical drawer it is (by index), else none."""
    direct = [d for d in state.drawers if d["id"] == drawer_id]
    if direct or not isinstance(drawer_id, str) or not drawer_id:
        return direct
    return sorted((d for d in state.drawers if d.get("parent") == drawer_id),
                  key=lambda d: (d.get("chunk_index", 0), d["id"]))


def drawer_view(drawer_id: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """One drawer as 3.11's get_drawer and get_drawers answer it: a row asked for by its own
    id as it is (a chunk too); a logical drawer as its chunks joined, with their count and
    ids (in the answer and in its metadata)."""
    first = rows[0]
    view = {"drawer_id": drawer_id, "content": "".join(d["content"] for d in rows),
            "wing": first["wing"], "room": first["room"], "metadata": drawer_metadata(first)}
    if first["id"] != drawer_id:
        ids = [d["id"] for d in rows]
        view.update({"chunks": len(ids), "chunk_ids": ids})
        view["metadata"].update({"chunks": len(ids), "chunk_ids": ids})
    return view


def listed_drawers(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """3.11's list_drawers entries of some rows: each single row, then each chunked drawer
    collapsed under its logical id (a 200-character preview of its joined text), by id."""
    groups: dict[str, list[dict[str, Any]]] = {}
    entries = []
    for row in rows:
        if row.get("parent") is not None:
            groups.setdefault(row["parent"], []).append(row)
    for row in rows:
        if row.get("parent") is None and row["id"] not in groups:
            entries.append({"drawer_id": row["id"], "wing": row["wing"], "room": row["room"],
                            "content_preview": _preview(row["content"]),
                            "metadata": drawer_metadata(row)})
    for parent, parts in groups.items():
        parts.sort(key=lambda d: (d.get("chunk_index", 0), d["id"]))
        ids = [d["id"] for d in parts]
        meta = {**drawer_metadata(parts[0]), "chunks": len(ids), "chunk_ids": ids}
        entries.append({"drawer_id": parent, "wing": parts[0]["wing"],
                        "room": parts[0]["room"],
                        "content_preview": _preview("".join(d["content"] for d in parts)),
                        "metadata": meta, "chunks": len(ids), "chunk_ids": ids})
    entries.sort(key=lambda entry: entry["drawer_id"])
    return entries


def _preview(content: str) -> str:
    return content[:200] + "..." if len(content) > 200 else content


#: 3.11's default chunk size: longer content is filed as chunks of this many characters
CHUNK_SIZE = 800


def chunk_rows(drawer_id: str, content: str, fields: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows 3.11 stores for ``content`` under ``drawer_id``: one row, or past
    ``CHUNK_SIZE`` one per chunk (``<id>_chunk_<index:06d>``) naming its logical drawer."""
    if len(content) <= CHUNK_SIZE:
        return [{"id": drawer_id, **fields, "content": content}]
    return [{"id": f"{drawer_id}_chunk_{start // CHUNK_SIZE:06d}", **fields,
             "content": content[start:start + CHUNK_SIZE], "parent": drawer_id,
             "chunk_index": start // CHUNK_SIZE}
            for start in range(0, len(content), CHUNK_SIZE)]


def filed(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """What 3.11 adds to a write's answer of its rows: the chunk count, and the chunk ids
    when there is more than one row."""
    if len(rows) == 1 and rows[0].get("parent") is None:
        return {"chunks": 1}
    return {"chunks": len(rows), "chunk_ids": [row["id"] for row in rows]}


def default_diary_wing(agent: str) -> str:
    """The wing 3.11 files an agent's diary in when none is named: ``wing_`` + the lower-cased
    name with spaces as ``_``."""
    return "wing_" + agent.strip().lower().replace(" ", "_")


class PalaceStore:
    """Holds a :class:`PalaceState`, optionally mirrored to a JSON file shared across processes."""

    def __init__(self, path: str | os.PathLike[str] | None = None,
                 initial: dict[str, Any] | None = None) -> None:
        self.path = os.fspath(path) if path else None
        self.state = PalaceState.from_json(initial or {})
        if self.path is not None and os.path.exists(self.path):
            self.state = self._read()
        #: 3.11 checks the chroma database's integrity once, when the server starts: a palace
        #: initialised later in the same process still reports "no quick_check ran", until a
        #: ``reconnect`` runs the check again (then on the palace as it is)
        self.started_initialised = self.state.initialised
        #: 3.11 recomputes its own mesh profile at most once a minute, per server process
        self.profile_cache: dict[str, Any] = {}

    def _read(self) -> PalaceState:
        assert self.path is not None
        with open(self.path, encoding="utf-8") as handle:
            text = handle.read()
        data = json.loads(text) if text.strip() else {}
        if not isinstance(data, dict):
            raise ValueError(f"expected a JSON object, got {type(data).__name__}")
        if not isinstance(data.get("replica"), str):  # a file written without one
            data["replica"] = replica_id_for(self.path)
        try:
            return PalaceState.from_json(data)
        except (TypeError, KeyError, AttributeError) as exc:
            raise ValueError(f"not a palace state ({type(exc).__name__}: {exc})") from None

    @contextlib.contextmanager
    def transaction(self, write: bool) -> Iterator[PalaceState]:
        """Reload before and save after, under a file lock, when a state file is in use."""
        if self.path is None:
            yield self.state
            return
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        with open(self.path + ".lock", "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX if write else fcntl.LOCK_SH)
            if os.path.exists(self.path):
                self.state = self._read()
            yield self.state
            if write:
                tmp = f"{self.path}.{os.getpid()}.tmp"
                with open(tmp, "w", encoding="utf-8") as handle:
                    handle.write(json.dumps(self.state.to_json(), ensure_ascii=False, indent=1))
                os.replace(tmp, self.path)


if TYPE_CHECKING:
    Handler = Callable[[PalaceState, dict[str, Any]], dict[str, Any]]
_HANDLERS: dict[str, tuple[Handler, bool]] = {}


def tool(name: str, writes: bool = False) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        _HANDLERS[name] = (fn, writes)
        return fn

    return register


def run_handler(state: PalaceState, name: str, args: dict[str, Any]) -> Any:
    """Another tool's handler on the same state, inside a running tool (checkpoint's
    duplicate check): 3.11 reuses its single-item handlers the same way."""
    if name not in _HANDLERS:
        _load_the_rest()
    return _HANDLERS[name][0](state, args)


def run_tool(store: PalaceStore, name: str, args: dict[str, Any],
             palace_path: str) -> dict[str, Any]:
    """Run one tool against the palace and return its (business) result object."""
    entry = _HANDLERS.get(name)
    if entry is None:
        _load_the_rest()
        entry = _HANDLERS.get(name)
    if entry is None:
        return unmodelled(name)
    handler, writes = entry
    with store.transaction(write=writes) as state:
        args = dict(args)
        args["__palace__"] = palace_path
        args["__integrity_checked__"] = store.started_initialised
        args["__profile_cache__"] = store.profile_cache
        answer = handler(state, args)
        if name == "mempalace_reconnect":
            store.started_initialised = state.initialised
        return answer


@functools.cache
def _load_the_rest() -> None:
    """Register the tools of palace_graph, palace_records and palace_sync on first use: a
    bridge respawns the fake often, and most sessions never call them."""
    from palace_conformance.fake import palace_graph, palace_records, palace_sync  # noqa: F401


def unmodelled(what: str) -> dict[str, Any]:
    """The visible answer for what the fake does not model (README, "Fidelity")."""
    return {"success": False, "error": f"{what} is not modelled by the palace-conformance fake "
                                       "palace", "fake_unmodelled": True}


# --- a fresh palace (no chroma database yet) ---------------------------------------------


def _library_versions() -> dict[str, Any]:
    return {"stale": False, "serving": {"mempalace": VERSION, "chromadb": CHROMA_VERSION},
            "packages": []}


def _updates() -> dict[str, Any]:
    return {"server": {"enabled": False, "installed": VERSION}}


def _fresh_status(palace: str) -> dict[str, Any]:
    return {**chroma_missing(palace), "sqlite_integrity": _unchecked_integrity(palace),
            "library_versions": _library_versions(), "updates": _updates()}


def _unchecked_integrity(palace: str) -> dict[str, Any]:
    sqlite_path = f"{palace}/chroma.sqlite3"
    return {"checked": False, "ok": None, "sqlite_version": SQLITE_VERSION, "palace": palace,
            "sqlite_path": sqlite_path, "error_count": 0, "errors": [],
            "reason": f"no quick_check ran: {sqlite_path} does not exist, so there was no "
                      "SQLite database to open"}


def _fresh_search(palace: str) -> dict[str, Any]:
    return {"error": "No palace found", "results": [],
            "hint": "Run: mempalace init <dir> && mempalace mine <dir>"}


BACKEND_OPEN_FAILED = "Backend open failed"


def backend_open_failed() -> dict[str, Any]:
    """What 3.11 answers a read that opens a ``chroma.sqlite3`` without its collection (the
    half-made palace of :func:`half_make`); the brain flags it ``isError``."""
    return {"error": BACKEND_OPEN_FAILED,
            "details": "Could not open the selected backend collection.",
            "hint": "Run: mempalace status or mempalace repair-status for diagnostics.",
            "backend": "chroma"}


def fresh(state: PalaceState, args: dict[str, Any]) -> dict[str, Any] | None:
    """3.11's answer of a tool that opens the chroma database while it has no collection (none
    at all, or a half-made one), else None."""
    if state.initialised:
        return None
    return backend_open_failed() if state.bare_database else chroma_missing(args["__palace__"])


def make_directory(state: PalaceState) -> None:
    """3.11 makes the palace directory when it opens the event log (every event, task, patch
    and artifact tool, ``mesh_peers``), whatever the call's arguments then say."""
    state.directory = True


def half_make(state: PalaceState) -> None:
    """3.11's ``search`` and ``sync`` open a fresh palace through chromadb's client, which
    creates ``chroma.sqlite3`` when the palace directory exists, and then find no collection.
    From then on a read answers "Backend open failed" until a vector write (or ``status``)
    creates the collection. Without the directory, nothing is made."""
    if not state.initialised and state.directory:
        state.bare_database = True


def vector_written(state: PalaceState) -> None:
    """The first vector write creates the chroma database and its collection (and the
    palace directory)."""
    state.initialised = True
    state.bare_database = False
    state.directory = True


def optional_name(field: str, value: Any) -> str | None:
    """3.11's check of an optional name filter (wing, room): a non-string raises
    AttributeError on ``strip`` (-32000), a bad name is the problem text, absent is None."""
    if value is None or not value.strip():
        return None
    return argument_problem(field, value, "name")


# --- palace overview -----------------------------------------------------------------------


@tool("mempalace_status", writes=True)
def _status(state: PalaceState, args: dict[str, Any]) -> dict[str, Any]:
    palace = args["__palace__"]
    if state.bare_database:
        # 3.11's status opens with create=True when chroma.sqlite3 exists: it makes the
        # collection and answers as an empty palace
        vector_written(state)
    if not state.initialised:
        return _fresh_status(palace)
    wings: dict[str, int] = {}
    rooms: dict[str, int] = {}
    for drawer in state.drawers:
        wings[drawer["wing"]] = wings.get(drawer["wing"], 0) + 1
        rooms[drawer["room"]] = rooms.get(drawer["room"], 0) + 1
    integrity = ({"checked": True, "ok": True, "sqlite_version": SQLITE_VERSION,
                  "palace": palace, "sqlite_path": f"{palace}/chroma.sqlite3",
                  "error_count": 0, "errors": []}
                 if args["__integrity_checked__"] else _unchecked_integrity(palace))
    return {
        "total_drawers": len(state.drawers), "wings": wings, "rooms": rooms,
        "protocol": PROTOCOL_TEXT, "aaak_dialect": AAAK_TEXT, "backend": "chroma",
        "embedding_device": "fake (deterministic word overlap)",
        "sqlite_integrity": integrity,
        "library_versions": _library_versions(), "updates": _updates(),
    }


@tool("mempalace_list_wings")
def _list_wings(state: PalaceState, args: dict[str, Any]) -> dict[str, Any]:
    if (missing := fresh(state, args)) is not None:
        return missing
    wings: dict[str, int] = {}
    for drawer in state.drawers:
        wings[drawer["wing"]] = wings.get(drawer["wing"], 0) + 1
    return {"wings": wings}


@tool("mempalace_list_rooms")
def _list_rooms(state: PalaceState, args: dict[str, Any]) -> dict[str, Any]:
    wing = args.get("wing")
    if (problem := optional_name("wing", wing)) is not None:
        return {"error": problem}
    if (missing := fresh(state, args)) is not None:
        return missing
    rooms: dict[str, int] = {}
    for drawer in state.drawers:
        if not wing or drawer["wing"] == wing.strip():
            rooms[drawer["room"]] = rooms.get(drawer["room"], 0) + 1
    return {"wing": wing.strip() if wing else "all", "rooms": rooms}


@tool("mempalace_get_taxonomy")
def _get_taxonomy(state: PalaceState, args: dict[str, Any]) -> dict[str, Any]:
    if (missing := fresh(state, args)) is not None:
        return missing
    taxonomy: dict[str, dict[str, int]] = {}
    for drawer in state.drawers:
        rooms = taxonomy.setdefault(drawer["wing"], {})
        rooms[drawer["room"]] = rooms.get(drawer["room"], 0) + 1
    return {"taxonomy": taxonomy}


@tool("mempalace_get_aaak_spec")
def _aaak(state: PalaceState, args: dict[str, Any]) -> dict[str, Any]:
    return {"aaak_spec": AAAK_TEXT}


#: how long 3.11 repeats a server's own mesh profile before it counts again (its node-profile
#: cache: a write within the minute is not seen by ``mesh_peers``)
PROFILE_TTL_S = 60.0


@tool("mempalace_mesh_peers", writes=True)
def _mesh_peers(state: PalaceState, args: dict[str, Any]) -> dict[str, Any]:
    import platform  # here, not at the top: every (re)spawn of the fake pays its imports
    import socket

    make_directory(state)
    cache = args.get("__profile_cache__", {})
    profile = cache.get("profile")
    if profile is None or time.monotonic() - cache["at"] >= PROFILE_TTL_S:
        # 3.11 advertises this host's profile; a palace with a database is also a replica
        roles = (["replica"] if state.initialised else []) + (["agents"] if state.events else [])
        profile = {"roles": [*roles, "compute"],
                   "accelerator": {"embedder": "fake", "provider": "CPU"},
                   "hardware": platform.platform(),
                   "drawers": len(state.drawers) if state.initialised else None,
                   "advertised_at": _now().isoformat()}
        cache.update(profile=profile, at=time.monotonic())
    seen = max((e["origin_seq"] for e in state.events if e.get("origin_replica") == state.replica),
               default=0)
    vector = {state.replica: seen} if seen else {}
    return {"self": {"replica_id": state.replica, "name": socket.gethostname(),
                     "version_vector": vector, "profile": profile},
            "peers": [], "unnamed_origins": [], "origin_profiles": {state.replica: profile},
            "sync_interval_s": 15.0,
            "estate_source": {"in_process": False, "published_at": None, "writer_alive": False}}


# --- drawers -------------------------------------------------------------------------------


def drawer_id_for(wing: str, room: str, content: str) -> str:
    """3.11's add_drawer id: ``drawer_<wing>_<room>_`` and 24 hex digits of the SHA-256 of
    the three parts, each written as ``<length>:<text>`` (its published id recipe v3)."""
    key = "".join(f"{len(part)}:{part}" for part in (wing, room, content))
    return f"drawer_{wing}_{room}_{sha256_hex(key)[:24]}"


def _file_drawer(state: PalaceState, wing: str, room: str, content: str, added_by: str,
                 source_file: str = "?") -> dict[str, Any]:
    drawer_id = drawer_id_for(wing, room, content)
    rows = chunk_rows(drawer_id, content, {
        "wing": wing, "room": room, "added_by": added_by, "source_file": source_file,
        "created_at": _now().isoformat()})
    known = {d["id"] for d in state.drawers}
    if drawer_id in known or rows[-1]["id"] in known:  # 3.11 probes the id and last chunk
        return {"success": True, "reason": "already_exists", "drawer_id": drawer_id}
    vector_written(state)
    state.drawers.extend(rows)
    return {"success": True, "drawer_id": drawer_id, "wing": wing, "room": room,
            **filed(rows)}


@tool("mempalace_add_drawer", writes=True)
def _add_drawer(state: PalaceState, args: dict[str, Any]) -> dict[str, Any]:
    refused = refusal(("wing", args["wing"], "name"), ("room", args["room"], "name"),
                       ("content", args["content"], "content"))
    if refused is not None:
        return refused
    # 3.11 strips lone surrogates from a given source_file and from added_by with re.sub:
    # anything but a string raises TypeError there (-32000)
    for field in ("source_file", "added_by"):
        value = args.get(field, "mcp" if field == "added_by" else None)
        if (value or field == "added_by") and not isinstance(value, str):
            raise TypeError(f"expected string or bytes-like object, got '{type(value).__name__}'")
    args = stripped(args, "wing", "room")
    return _file_drawer(state, args["wing"], args["room"], args["content"],
                        args.get("added_by", "mcp"), args.get("source_file", "?"))


@tool("mempalace_checkpoint", writes=True)
def _checkpoint(state: PalaceState, args: dict[str, Any]) -> dict[str, Any]:
    try:
        threshold = float(args.get("dedup_threshold", 0.9))
    except (TypeError, ValueError):
        return {"error": "dedup_threshold must be a number"}
    items = args["items"]
    if not isinstance(items, list):  # 3.11: a plain result, no success key, nothing filed
        return {"error": "items must be a list of {wing, room, content} objects"}
    diary = args.get("diary")
    # 3.11: an explicit added_by, else the diary's agent, else "checkpoint" (blank: unset)
    writer = next((name for name in (args.get("added_by"), (diary or {}).get("agent_name")
                                     if isinstance(diary, dict) else None)
                   if isinstance(name, str) and name.strip()), "checkpoint")
    result: dict[str, Any] = {"added": [], "duplicates": [], "errors": []}
    for item in items:
        if not isinstance(item, dict):
            result["errors"].append({"item": item, "error": "item must be an object"})
            continue
        if not all(isinstance(item.get(k), str) and item.get(k)
                   for k in ("wing", "room", "content")):
            result["errors"].append({"item": item,
                                     "error": "wing, room, content must be non-empty strings"})
            continue
        # 3.11 checks each item for a near duplicate first (its check_duplicate) and files
        # only the others; an exact re-file that slips through is added as already_exists
        duplicate = run_handler(state, "mempalace_check_duplicate",
                                {**args, "content": item["content"], "threshold": threshold})
        if duplicate.get("is_duplicate"):
            result["duplicates"].append({"room": item["room"],
                                         "matches": duplicate.get("matches", [])})
            continue
        filed = _add_drawer(state, {"wing": item["wing"], "room": item["room"],
                                    "content": item["content"], "added_by": writer})
        result["added" if filed.get("success") else "errors"].append(filed)
    if diary is not None:
        entry = (diary.get("entry") or diary.get("content")) if isinstance(diary, dict) else None
        if not isinstance(diary, dict):
            result["errors"].append({"diary": diary, "error": "diary must be an object"})
        elif not isinstance(entry, str) or not entry:
            result["errors"].append({"diary": diary,
                                     "error": "diary entry must be a non-empty string"})
        else:
            result["diary"] = _write_diary(state, diary.get("agent_name", "cursor-ide"), entry,
                                           diary.get("topic", "session-checkpoint"),
                                           diary.get("wing", ""))
    return result


@tool("mempalace_get_drawer")
def _get_drawer(state: PalaceState, args: dict[str, Any]) -> dict[str, Any]:
    if (missing := fresh(state, args)) is not None:
        return missing
    if not isinstance(args["drawer_id"], str):  # chroma's complaint, as 3.11 passes it on
        return {"error": f"Expected ID to be a str, got {args['drawer_id']!r} in get."}
    rows = logical_rows(state, args["drawer_id"])
    if rows:
        return drawer_view(args["drawer_id"], rows)
    return {"error": f"Drawer not found: {args['drawer_id']}"}  # 3.11: no success key


_WORD = r"\w+"


@tool("mempalace_search", writes=True)
def _search(state: PalaceState, args: dict[str, Any]) -> dict[str, Any]:
    if (refused := _search_refusal(args)) is not None:
        return refused
    args = {**args, "wing": _optional_filter(args.get("wing"), "wing"),
            "room": _optional_filter(args.get("room"), "room")}
    if args.get("cli_compatible") and (answer := _cli_search(state, args)) is not None:
        return answer
    result = _searched(state, args)
    if (cleaned := clean_query(args["query"] or "")).changed:
        result.update(cleaned.report())  # on every answer of the non-CLI search, refusals too
    if args.get("context"):  # 3.11 says so on every answer of its non-CLI search
        result["context_received"] = True
    return result


def _cli_search(state: PalaceState, args: dict[str, Any]) -> dict[str, Any] | None:
    """3.11's CLI-compatible search: the CLI's printout as ``cli_output`` (the fake's own
    ranking and scores in the CLI's layout: fidelity's ``cli-search-hits-under-another-embedder``
    rule masks which rows and their scores, as for a search's results); None (searched as
    usual) when the date window is refused."""
    if not state.initialised:
        return fresh(state, args)
    query = args["query"]
    none = {"query": query, "cli_output": f'\n  No results found for: "{query}"\n'}
    if not any(args.get("wing") in (None, d["wing"]) and args.get("room") in (None, d["room"])
               for d in state.drawers):
        return none
    searched = _searched(state, args)
    if "results" not in searched:
        return None
    if not searched["results"]:
        return none
    return {"query": query, "cli_output": cli_printout(query, args, searched["results"])}


def cli_printout(query: str, args: Mapping[str, Any], hits: list[dict[str, Any]]) -> str:
    """The CLI's search printout (3.11's ``cli_search``) of ranked ``hits`` (search results)."""
    rule = "=" * 60
    lines = ["", rule, f'  Results for: "{query}"']
    for label, key in (("Wing", "wing"), ("Room", "room"), ("Since", "since"),
                       ("Before", "before")):
        if args.get(key):
            lines.append(f"  {label}: {args[key]}")
    lines += [rule, ""]
    for number, hit in enumerate(hits, 1):
        lines += [f"  [{number}] {hit['wing']} / {hit['room']}",
                  f"      Source: {hit['source_file']}",
                  f"      Match:  cosine_sim={round(hit['similarity'], 3)}  "
                  f"bm25={hit['bm25_score']}", ""]
        lines += [f"      {line}" for line in str(hit["text"]).strip().split("\n")]
        lines += ["", "  " + "-" * 56]
    return "\n".join(lines) + "\n\n"


def _searched(state: PalaceState, args: dict[str, Any]) -> dict[str, Any]:
    query = clean_query(args["query"] or "").text
    if args.get("include_media") or args.get("query_task", "search") != "search":
        return _media_refusal()
    window = date_window(args)  # 3.11's window, checked as list_drawers checks it
    if isinstance(window, str):
        return {"error": window}
    since, before = window
    if not state.initialised:
        half_make(state)
        return _fresh_search(args["__palace__"])
    terms = {w.lower() for w in re.findall(_WORD, query)}
    limit = max(1, min(int(args.get("limit", 5)), 100))  # 3.11 clamps to 1..100
    scored = []
    rows = [d for d in state.drawers
            if args.get("wing") in (None, d["wing"]) and args.get("room") in (None, d["room"])
            and in_window(d["created_at"], since, before)]
    # 3.11 counts the rows it filtered and answers each chunk under its logical drawer's id
    candidates = _rejoined(rows)
    for order, drawer in enumerate(candidates):
        words = {w.lower() for w in re.findall(_WORD, drawer["content"])}
        overlap = len(terms & words)
        # like 3.11's vector search: the nearest drawers come back even when no word is shared
        scored.append((-overlap, order, drawer, overlap))
    scored.sort(key=lambda item: (item[0], item[1]))
    results = []
    for _, _, drawer, overlap in scored[:limit]:
        distance = round(1.0 - overlap / max(len(terms), 1), 4)
        results.append({  # 3.11's 18 keys, in its order; the scores are word overlap
            "drawer_id": drawer["id"], "text": drawer["content"], "wing": drawer["wing"],
            "room": drawer["room"], "source_file": _name_of(drawer.get("source_file", "?")) or "?",
            "source_path": "" if drawer.get("source_file", "?") == "?" else drawer["source_file"],
            "created_at": drawer["created_at"], "filed_at": drawer["created_at"],
            "authored_at": drawer["created_at"], "authored_at_source": "filed_at",
            "content_date": drawer.get("content_date"),
            "content_date_source": drawer.get("content_date_source", "unknown"),
            "similarity": round(1 - distance, 4), "distance": distance,
            "effective_distance": distance, "closet_boost": 0.0, "matched_via": "drawer",
            "bm25_score": float(overlap),
        })
    return {"query": query,
            "filters": {"wing": args.get("wing"), "room": args.get("room"),
                        "source_file": args.get("source_file"), "since": args.get("since"),
                        "before": args.get("before")},
            "total_before_filter": len(rows), "results": results}


def _optional_filter(value: Any, field: str) -> str | None:
    """3.11's optional wing/room filter: None or blank is no filter (a non-string raises
    AttributeError on ``strip``, -32000), else the name checked and stripped."""
    if value is None or not value.strip():
        return None
    if (problem := argument_problem(field, value, "name")) is not None:
        raise ValueError(problem)
    return str(value.strip())


def _search_refusal(args: dict[str, Any]) -> dict[str, Any] | None:
    """3.11's search checks, in its order, before it searches: the wing and room filters,
    source_file, candidate_strategy, include_media with query_task, cli_compatible's
    combinations."""
    try:
        _optional_filter(args.get("wing"), "wing")
        _optional_filter(args.get("room"), "room")
    except ValueError as problem:
        return {"error": str(problem)}
    source = args.get("source_file")
    if source is not None:
        if not isinstance(source, str):
            return {"error": "source_file must be a string"}
        if "\x00" in source.strip():
            return {"error": "source_file contains null bytes"}
    strategy = args.get("candidate_strategy") or "vector"
    if not isinstance(strategy, str) or strategy not in {"vector", "union"}:
        return {"error": "candidate_strategy must be one of ('vector', 'union')"}
    media, task = args.get("include_media", False), args.get("query_task", "search")
    if not isinstance(media, bool) or not isinstance(task, str) or task not in {"search",
                                                                               "code"}:
        return {"error": "include_media must be boolean and query_task must be 'search' or "
                         "'code'"}
    if args.get("cli_compatible") and (media or task != "search"):
        return {"error": "cli_compatible cannot be combined with media/code task search"}
    # 3.11's query sanitiser runs next: a falsy query is searched as "", another non-string
    # raises AttributeError (-32000) before any CLI-compatible check
    (args["query"] or "").strip()
    if args.get("cli_compatible"):  # 3.11's CLI-compatible search takes none of these
        if source is not None and source.strip():
            return {"error": "cli-compatible search does not support source_file"}
        unsupported = [name for name, given in (
            ("candidate_strategy", strategy != "vector"),
            ("min_similarity", args.get("min_similarity") is not None),
            ("max_distance", args.get("max_distance") is not None),
            ("context", args.get("context") is not None)) if given]
        if unsupported:
            return {"error": "cli-compatible search does not support " + ", ".join(unsupported)}
        if clean_query(args["query"] or "").text != args["query"]:
            return {"error": "cli-compatible search requires an unchanged query"}
    return None


def _media_refusal() -> dict[str, Any]:
    """3.11's media/code-task search under any embedding model but ``embeddinggemma2`` (the
    kit's stub is another): refused before its window is parsed or its palace opened, so on a
    fresh palace too, which it leaves as it was."""
    return {"error": "Media and code task search require embedding_model='embeddinggemma2'",
            "hint": "Use the isolated embeddinggemma2 palace and compatible indexes."}


def _rejoined(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows as 3.11's search answers them: each chunk a result of its own text, under its
    logical drawer's id."""
    return [{**row, "id": row["parent"]} if row.get("parent") is not None else row
            for row in rows]


MINE_FILE_CAP = 2000  # a mis-aimed mine (say, of '/') must not walk the whole disk


def _files_under(root: Path, cap: int) -> list[Path]:
    """Up to ``cap`` files below ``root`` in sorted walk order, without listing the rest."""
    from pathlib import Path

    found: list[Path] = []
    for here, dirs, names in os.walk(root):
        dirs.sort()
        for name in sorted(names):
            path = Path(here) / name
            if path.is_file():
                found.append(path)
                if len(found) >= cap:
                    return found
    return found


def mine_source(state: PalaceState, args: dict[str, Any]) -> dict[str, Any]:
    """Mine ``args["source"]``: the counts (files, drawers filed, wing), or 3.11's refusal."""
    from pathlib import Path

    source = Path(os.path.expanduser(args["source"]))  # a non-string: TypeError, -32000
    if not args["source"] or not source.exists():
        return {"success": False, "error": f"source not found: {args['source']!r}"}
    limit = int(args.get("limit", 0) or 0)
    cap = min(limit, MINE_FILE_CAP) if limit > 0 else MINE_FILE_CAP
    files = [source] if source.is_file() else _files_under(source, cap)
    wing = args.get("wing") or re.sub(r"[^\w]+", "_", (
        source.parent.name if source.is_file() else source.name)).lower()
    agent = args.get("agent", "mempalace")
    filed = 0
    if not args.get("dry_run"):
        for path in files:
            try:
                text = path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            if _already_mined(state, path):
                continue
            # 3.11's room detection is not modelled: a file no rule places lands in "general"
            result = _file_drawer(state, wing, "general", text[:4000].strip(), agent, str(path))
            if result.get("reason") != "already_exists":
                filed += 1
                _mark_mined(state, result["drawer_id"], path)
    return {"success": True, "source": str(source), "wing": wing,
            "mode": args.get("mode", "projects"), "files_processed": len(files),
            "drawers_filed": filed, "agent": agent, "dry_run": bool(args.get("dry_run"))}


def _mtime(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except OSError:
        return None


def _already_mined(state: PalaceState, path: Path) -> bool:
    """3.11's ``file_already_mined(check_mtime=True)``: a file some drawer was filed from, at
    the file's present mtime, is skipped (whatever wing this mine names)."""
    stored = [d for d in state.drawers if d.get("source_file") == str(path)]
    return bool(stored) and all(d.get("source_mtime", _mtime(path)) == _mtime(path)
                                for d in stored)


def _mark_mined(state: PalaceState, drawer_id: str, path: Path) -> None:
    """A mined file's rows carry its mtime (3.11's ``source_mtime``) and the first one the
    closet 3.11 files beside them (its AAAK index of the file: one closet for the kit's small
    files; ``delete_by_source`` counts and purges it)."""
    from datetime import datetime

    rows = [d for d in state.drawers if d["id"] == drawer_id or d.get("parent") == drawer_id]
    mtime = _mtime(path)
    line = 1
    for index, row in enumerate(rows):
        row["source_mtime"] = mtime
        row["closets"] = 1 if index == 0 else 0
        # 3.11's miner metadata: the chunk's lines, the pass's chunk count, the file's date
        # (its mtime's: the fake models no date in a file's name, front matter or body), the
        # normaliser's version and the hall of the chunk's words
        lines = row["content"].count("\n")
        row.update({"chunk_total": len(rows), "line_start": line, "line_end": line + lines,
                    "normalize_version": 2, "hall": detect_hall(row["content"])})
        line += lines + 1
        if mtime is not None:
            row.update({"content_date": datetime.fromtimestamp(mtime).strftime("%Y-%m-%d"),
                        "content_date_source": "mtime"})


_RULE, _THIN = "=" * 55, "-" * 55


def mine_report(counts: dict[str, Any], palace: str) -> str:
    """The CLI report 3.11's mine tool returns as ``output``: its layout, the fake's counts."""
    dry = counts["dry_run"]
    skipped = counts["files_processed"] - counts["drawers_filed"]
    return "".join([
        f"\n{_RULE}\n  MemPalace Mine\n{_RULE}\n", f"  Wing:    {counts['wing']}\n",
        f"  Rooms:   {counts['mode']}\n", f"  Files:   {counts['files_processed']}\n",
        f"  Palace:  {palace}\n", "  Device:  fake (deterministic word overlap)\n",
        "  DRY RUN -- nothing will be filed\n" if dry else "", f"{_THIN}\n\n\n{_RULE}\n",
        "  Done.\n", f"  Files processed: {counts['drawers_filed']}\n",
        f"  Files skipped ({'read error or too short' if dry else 'already filed or other'}): "
        f"{skipped}\n", f"  Drawers filed: {counts['drawers_filed']}\n\n  By room:\n",
        f"    {counts['mode']}: {counts['drawers_filed']}\n" if counts["drawers_filed"] else "",
        "\n  Next: mempalace search \"what you're looking for\"\n", f"{_RULE}\n\n"])


@tool("mempalace_mine", writes=True)
def _mine(state: PalaceState, args: dict[str, Any]) -> dict[str, Any]:
    if (refused := _mine_refusal(args)) is not None:
        return refused
    counts = mine_source(state, args)
    if not counts["success"]:
        return counts
    # 3.11's shape: the CLI's text report as output (its chunking and room detection are not
    # modelled: one drawer per file, in a room named after the mode)
    # 3.11 echoes dry_run as it was given (a truthy string runs dry too)
    return {"success": True, "mode": counts["mode"], "dry_run": args.get("dry_run", False),
            "output": mine_report(counts, args["__palace__"])}


MINE_MODES = ("projects", "convos", "extract")


def _mine_refusal(args: dict[str, Any]) -> dict[str, Any] | None:
    """3.11's mine checks, in its order, before it mines: the mode, include_ignored,
    include_subagents, then the source (a directory; one file only in convos mode)."""
    mode = args.get("mode", "projects")
    if mode not in MINE_MODES:
        return {"success": False,
                "error": f"invalid mode '{mode}'; expected one of: {', '.join(MINE_MODES)}"}
    ignored = args.get("include_ignored")
    if ignored is not None and (not isinstance(ignored, list) or any(
            not isinstance(path, str) or not path.strip() for path in ignored)):
        return {"success": False, "error": "include_ignored must be an array of non-empty "
                                           "project-relative path strings",
                "error_class": "ValueError"}
    if ignored and mode != "projects":
        return {"success": False, "error": "include_ignored is supported only in projects mode",
                "error_class": "ValueError"}
    if not isinstance(args.get("include_subagents", False), bool):
        return {"success": False, "error": "include_subagents must be a boolean",
                "error_class": "ValueError"}
    source = args["source"]
    if not source:
        return {"success": False, "error": f"source not found: {source!r}"}
    from pathlib import Path

    where = Path(os.path.expanduser(source))  # a non-string: TypeError (-32000), as in 3.11
    if not (where.is_dir() or (mode == "convos" and where.is_file())):
        return {"success": False, "error": f"source not found: {source!r}"}
    return None


# --- diary ---------------------------------------------------------------------------------


def _write_diary(state: PalaceState, agent: str, entry: str, topic: str,
                 wing: str | None) -> dict[str, Any]:
    wing = wing or None  # 3.11: a blank wing is the agent's own
    # 3.11 names the entry 'content' in its complaint, whichever argument carried it
    refused = refusal(("agent_name", agent, "name"), ("content", entry, "content"),
                       ("topic", topic, "name"))
    if refused is not None:
        return refused
    if wing is not None and (problem := argument_problem("name", wing, "name")) is not None:
        # 3.11 checks the wing outside its refusals, under sanitize_name's default field name:
        # the ValueError escapes the tool (-32000)
        raise ValueError(problem)
    agent, topic = agent.strip(), topic.strip()
    wing = wing.strip() if wing is not None else None
    drawer = _diary_drawer(agent, entry, topic, wing)
    fields = {k: v for k, v in drawer.items() if k not in ("id", "content")}
    rows = chunk_rows(drawer["id"], entry, fields)
    vector_written(state)
    state.drawers.extend(rows)
    return {"success": True, "entry_id": drawer["id"], "agent": drawer["agent"], "topic": topic,
            "timestamp": drawer["created_at"], **filed(rows)}


@tool("mempalace_diary_write", writes=True)
def _diary_write(state: PalaceState, args: dict[str, Any]) -> dict[str, Any]:
    return _write_diary(state, args["agent_name"], args["entry"], args.get("topic", "general"),
                        args.get("wing"))


@tool("mempalace_diary_read")
def _diary_read(state: PalaceState, args: dict[str, Any]) -> dict[str, Any]:
    agent = args["agent_name"]
    problem = argument_problem("agent_name", agent, "name") or (
        # 3.11 checks the wing under sanitize_name's default field name
        argument_problem("name", args["wing"], "name") if args.get("wing") else None)
    if problem is not None:
        return {"error": problem}
    if (missing := fresh(state, args)) is not None:
        return missing
    agent = agent.strip().lower()
    wing = (args.get("wing") or "").strip()
    last_n = max(1, min(100, int(args.get("last_n", 10))))
    # 3.11: the agent's entries in every wing it wrote to, unless a wing is named
    entries = [d for d in state.drawers if d["room"] == "diary" and wing in ("", d["wing"])
               and (d["agent"] == agent if "agent" in d
                    else d["wing"] == default_diary_wing(agent))]
    if not entries:
        return {"agent": agent, "entries": [], "message": "No diary entries yet."}
    entries.sort(key=lambda d: d["created_at"], reverse=True)
    shown = entries[:last_n]
    return {"agent": agent,
            "entries": [{"date": d["created_at"][:10], "timestamp": d["created_at"],
                         "topic": d.get("topic", "general"), "content": d["content"]}
                        for d in shown],
            "total": len(entries), "showing": len(shown)}


# --- knowledge graph -----------------------------------------------------------------------


def triple_id_part(text: str) -> str:
    """One part of a triple id as 3.11 writes it: lower case, spaces as ``_`` (the fact keeps
    the text as given): ``Café Au`` → ``café_au``."""
    return text.lower().replace(" ", "_")


def entity_key(name: str) -> str:
    """A knowledge-graph entity as 3.11 keys it: lower case, spaces as ``_``, no ``'``."""
    return triple_id_part(name).replace("'", "")


def entity_names(state: PalaceState) -> dict[str, str]:
    """Each entity's name by its key: the text it was first filed under (3.11 files an entity
    once, ``INSERT OR IGNORE``, and answers a fact's far end by that name)."""
    named: dict[str, str] = {}
    for triple in state.triples:
        for name in (triple["subject"], triple["object"]):
            named.setdefault(entity_key(name), name)
    return named


@tool("mempalace_kg_add", writes=True)
def _kg_add(state: PalaceState, args: dict[str, Any]) -> dict[str, Any]:
    refused, args = checked_fact(args, ("object",), ("valid_from", "valid_to"))
    if refused is not None:
        return refused
    subject, predicate, obj = args["subject"], args["predicate"], args["object"]
    same = (entity_key(subject), triple_id_part(predicate), entity_key(obj))
    for known in state.triples:  # 3.11: an identical current fact is answered, not re-filed
        if (known.get("valid_to") is None and same == (
                entity_key(known["subject"]), triple_id_part(known["predicate"]),
                entity_key(known["object"]))):
            return {"success": True, "triple_id": known["id"],
                    "fact": f"{subject} \u2192 {predicate} \u2192 {obj}"}
    triple_id = (f"t_{triple_id_part(subject)}_{triple_id_part(predicate)}_"
                 f"{triple_id_part(obj)}_{digest(subject, predicate, obj)}")
    # 3.11 stores the predicate lower-cased, spaces as "_" (its answer's fact keeps the text)
    state.triples.append({"id": triple_id, "subject": subject,
                          "predicate": triple_id_part(predicate), "object": obj,
                          "valid_from": args.get("valid_from"), "valid_to": args.get("valid_to"),
                          "source_drawer_id": args.get("source_drawer_id"),
                          "source_closet": args.get("source_closet")})
    return {"success": True, "triple_id": triple_id,
            "fact": f"{subject} \u2192 {predicate} \u2192 {obj}"}


@tool("mempalace_kg_query")
def _kg_query(state: PalaceState, args: dict[str, Any]) -> dict[str, Any]:
    entity = args["entity"]
    if (problem := argument_problem("entity", entity, "value")) is not None:
        return {"error": problem}
    entity = entity.strip()
    args = dict(args)
    if (problem := temporal(args, "as_of")) is not None:
        return {"error": problem}
    if args.get("direction", "both") not in ("outgoing", "incoming", "both"):
        return {"error": "direction must be 'outgoing', 'incoming', or 'both'"}
    as_of = args.get("as_of") or None
    direction = args.get("direction", "both")
    today = as_of or _now().strftime("%Y-%m-%d")
    facts = []
    key = entity_key(entity)  # 3.11 matches entities by their key (case, spaces, "'")
    named = entity_names(state)
    # 3.11: the outgoing facts, then the incoming ones (a self-loop in both), the queried
    # name standing for the matched end, the far end by its first-filed name
    for way, near in (("outgoing", "subject"), ("incoming", "object")):
        if direction not in ("both", way):
            continue
        for triple in state.triples:
            if entity_key(triple[near]) != key:
                continue
            if as_of is not None and not _valid_at(triple, as_of):
                continue  # 3.11: only the facts valid then, all of them active
            ended = triple.get("valid_to") is not None and triple["valid_to"] <= today
            facts.append({
                "direction": way, "subject": named[entity_key(triple["subject"])],
                "predicate": triple["predicate"], "object": named[entity_key(triple["object"])],
                "valid_from": triple.get("valid_from"),
                "valid_to": triple.get("valid_to"), "confidence": 1.0,
                "source_closet": triple.get("source_closet"), "current": not ended, near: entity})
    future = [f for f in facts if f["valid_from"] is not None and f["valid_from"] > today
              and as_of is None]
    historical = [f for f in facts if not f["current"] and as_of is None]
    active = [f for f in facts if as_of is not None or (f["current"] and f not in future)]
    # 3.11's shape: facts sorted into active, historical and future relative to now (or as_of)
    return {"entity": entity, "as_of": as_of, "active_facts": active,
            "historical_facts": historical, "future_facts": future, "facts": facts,
            "count": len(facts)}


def _valid_at(triple: dict[str, Any], as_of: str) -> bool:
    """3.11's ``as_of`` window: from ``valid_from`` (a date: its first second) through
    ``valid_to`` (a date: its last second), either end open when absent."""
    def key(value: str, end: bool) -> str:
        return value + ("T23:59:59Z" if end else "T00:00:00Z") if len(value) == 10 else value

    start, stop = triple.get("valid_from"), triple.get("valid_to")
    at = key(as_of, False)
    return ((not start or key(start, False) <= at) and (not stop or key(stop, True) >= at))


# --- event log and artifacts ---------------------------------------------------------------


@tool("mempalace_event_append", writes=True)
def _event_append(state: PalaceState, args: dict[str, Any]) -> dict[str, Any]:
    make_directory(state)
    args = dict(args)
    if (problem := event_problem(state, args)) is not None:
        return {"success": False, "error": problem}
    return {"success": True, "event": append_event(state, args)}


def event_problem(state: PalaceState, args: dict[str, Any]) -> str | None:
    """3.11's checks of an appended event, in its order (the event type's pattern; stream,
    room and from_agent required, topic, to_agent, correlation_id, branch and base_commit
    optional routing fields; status; body; metadata; artifact_ids); what passes is written
    back as 3.11 stores it (stripped, a blank optional field as null)."""
    kind = args.get("type")
    if not isinstance(kind, str) or not kind.strip():
        return "type must be a non-empty string"
    if not re.match(_EVENT_TYPE, kind.strip()):
        return (f"type={kind.strip()!r} is not a valid event type "
                "(lowercase letters, digits, '.', '_', '-'; max 64 chars)")
    args["type"] = kind.strip()
    for field, required in (("stream", True), ("room", True), ("topic", False),
                            ("from_agent", True), ("to_agent", False),
                            ("correlation_id", False), ("branch", False),
                            ("base_commit", False)):
        value = args.get(field)
        if required and (value is None or value == ""):
            return f"{field} must be a non-empty string"
        args[field], problem = _routing(value, field)
        if problem is not None:
            return problem
    status = args.get("status")
    if status == "":
        args["status"] = None
    elif status is not None and (not isinstance(status, str) or status not in EVENT_STATUSES):
        return f"status={status!r} is not one of: {', '.join(sorted(EVENT_STATUSES))}"
    body = args.get("body")
    if body is not None and not isinstance(body, str):
        return "body must be a string"
    if isinstance(body, str) and "\x00" in body:
        return "body contains null bytes"
    if args.get("metadata") is not None and not isinstance(args["metadata"], dict):
        return "metadata must be an object"
    ids = args.get("artifact_ids")
    if ids is not None and (not isinstance(ids, list)
                            or not all(isinstance(i, str) and i for i in ids)):
        return "artifact_ids must be a list of artifact id strings"
    known = {artifact["id"] for artifact in state.artifacts}
    for artifact_id in ids or []:
        if artifact_id not in known:
            return f"artifact_ids references unknown artifact {artifact_id!r}"
    if ids:
        args["artifact_ids"] = list(dict.fromkeys(ids))
    return None


def append_event(state: PalaceState, args: dict[str, Any]) -> dict[str, Any]:
    seq = max((e["seq"] for e in state.events), default=0) + 1
    when = _now()
    event = {
        "id": f"evt_{when.strftime('%Y%m%dT%H%M%S')}_{digest(str(seq), str(args.get('body')))}",
        "seq": seq, "origin_replica": state.replica, "origin_seq": seq,
        "hlc": f"{int(when.timestamp() * 1000)}-{seq:06d}-{state.replica}",
        "type": args.get("type"), "stream": args.get("stream"), "room": args.get("room"),
        "topic": args.get("topic"), "from_agent": args.get("from_agent"),
        "to_agent": args.get("to_agent"), "correlation_id": args.get("correlation_id"),
        "branch": args.get("branch"), "base_commit": args.get("base_commit"),
        "status": args.get("status"), "artifact_ids": list(args.get("artifact_ids") or []),
        # 3.11 stores a missing body as ""
        "body": "" if args.get("body") is None else args["body"],
        "created_at": when.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "metadata": dict(args.get("metadata") or {}),
    }
    state.events.append(event)
    return event


_EVENT_FILTERS = ("stream", "room", "topic", "type", "correlation_id", "status")


def _event_selected(event: dict[str, Any], args: dict[str, Any]) -> bool:
    for key in _EVENT_FILTERS:
        if args.get(key) is not None and event.get(key) != args[key]:
            return False
    if args.get("writer") is not None and event.get("from_agent") != args["writer"]:
        return False
    # like 3.11: to_agent also matches '*' broadcasts; from_agent is NOT a filter
    wanted = args.get("to_agent")
    return wanted is None or event.get("to_agent") in (wanted, "*")


ROUTING_MAX = 256
_EVENT_TYPE = r"^[a-z0-9][a-z0-9_.-]{0,63}$"


def _routing(value: Any, field: str) -> tuple[Any, str | None]:
    """3.11's check of an optional routing filter: absent or ``""`` is no filter; else a
    non-blank string, stripped, at most 256 characters, without control characters."""
    if value is None or value == "":
        return None, None
    if not isinstance(value, str) or not value.strip():
        return None, f"{field} must be a non-empty string"
    value = value.strip()
    if len(value) > ROUTING_MAX:
        return None, f"{field} exceeds maximum length of {ROUTING_MAX} characters"
    if any(ord(ch) < 0x20 or ch == "\x7f" for ch in value):
        return None, f"{field} contains control characters"
    return value, None


def _bad_filter(args: dict[str, Any]) -> dict[str, Any] | None:
    """3.11's checks of event_list's and event_wait's filters, in its order (``writer`` is
    checked, and named, as ``from_agent``); a passing filter is written back stripped (or
    None when blank), so the selection sees what 3.11 queries with."""
    for key, named in (("stream", "stream"), ("room", "room"), ("topic", "topic"),
                       ("type", "type"), ("to_agent", "to_agent"), ("writer", "from_agent"),
                       ("correlation_id", "correlation_id"), ("status", "status"),
                       ("since_event_id", "since_event_id"),
                       ("before_event_id", "before_event_id")):
        value = args.get(key)
        if key == "type" and value not in (None, ""):
            if not isinstance(value, str) or not value.strip():
                return {"error": "type must be a non-empty string"}
            if not re.match(_EVENT_TYPE, value.strip()):
                return {"error": f"type={value.strip()!r} is not a valid event type "
                                 "(lowercase letters, digits, '.', '_', '-'; max 64 chars)"}
            args[key] = value.strip()
        elif key == "status":
            if value == "":
                args[key] = None
            elif value is not None and (not isinstance(value, str)
                                        or value not in EVENT_STATUSES):
                return {"error": f"status={value!r} is not one of: "
                                 f"{', '.join(sorted(EVENT_STATUSES))}"}
        else:
            args[key], problem = _routing(value, named)
            if problem is not None:
                return {"error": problem}
    if (problem := temporal(args, "since_created_at")) is not None:
        return {"error": problem}
    if args.get("__cursors_later__"):
        return None
    return _unknown_cursor(args)


def _unknown_cursor(args: dict[str, Any]) -> dict[str, Any] | None:
    ids = [e["id"] for e in args.get("__events__", [])]
    for key in ("since_event_id", "before_event_id"):
        if args.get(key) is not None and args[key] not in ids:
            return {"error": f"{key} {args[key]!r} not found"}
    return None


@tool("mempalace_event_list", writes=True)
def _event_list(state: PalaceState, args: dict[str, Any]) -> dict[str, Any]:
    make_directory(state)
    # 3.11's event log checks the order and the limit before it looks the cursors up
    args = {**args, "__events__": state.events, "__cursors_later__": True}
    if (refused := _bad_filter(args)) is not None:
        return refused
    order = args.get("order")
    order = (("asc" if args.get("since_event_id") else "desc") if order is None
             else str(order).lower().strip())
    if order not in ("asc", "desc"):
        return {"error": f"order={order!r} must be 'asc' or 'desc'"}
    limit = args.get("limit", 50)
    if not isinstance(limit, int) or limit < 1:
        return {"error": "limit must be a positive integer"}
    if (refused := _unknown_cursor(args)) is not None:
        return refused
    events, ids = _events_since(state, args)
    if args.get("before_event_id") in ids:
        events = events[: ids.index(args["before_event_id"])]
    events = [e for e in events if _event_selected(e, args)]
    # like 3.11: newest first unless resuming from a cursor; an explicit order always wins
    if order == "desc":
        events.reverse()
    events = events[:min(limit, 500)]
    if args.get("from_agent") and not args.get("writer"):
        return {"events": events, "count": len(events), "note": EVENT_LIST_NOTE}
    return {"events": events, "count": len(events)}


@tool("mempalace_event_ack", writes=True)
def _event_ack(state: PalaceState, args: dict[str, Any]) -> dict[str, Any]:
    make_directory(state)
    # like 3.11: the event id is checked as a routing field, then the event looked up, then
    # the ack is appended through the same checks as any event (from_agent, status, body ...)
    event_id, problem = _routing(args["event_id"], "event_id")
    if event_id is None and problem is None:
        problem = "event_id must be a non-empty string"
    if problem is not None:
        return {"success": False, "error": problem}
    target = next((e for e in state.events if e["id"] == event_id), None)
    if target is None:
        return {"success": False, "error": f"event {event_id!r} not found"}
    ack = {"type": "event.ack", "stream": target["stream"], "room": target["room"],
           "topic": args.get("topic") if args.get("topic") is not None else target["topic"],
           "from_agent": args["from_agent"], "to_agent": target["from_agent"],
           "correlation_id": target["correlation_id"] or target["id"],
           "status": args.get("status"), "body": args.get("body"),
           "metadata": {"ack_of": target["id"]}}
    if (problem := event_problem(state, ack)) is not None:
        return {"success": False, "error": problem}
    event = append_event(state, ack)
    return {"success": True, "event": event}


@tool("mempalace_artifact_put", writes=True)
def _artifact_put(state: PalaceState, args: dict[str, Any]) -> dict[str, Any]:
    make_directory(state)
    kind, content = args["kind"], args["content"]
    created_by, problem = artifact_problem(kind, args["created_by"], content,
                                           args.get("metadata"))
    if problem is not None:
        return {"success": False, "error": problem}
    artifact = store_artifact(state, kind, content, created_by, args.get("metadata"))
    return {"success": True, "artifact": artifact}


def artifact_problem(kind: Any, created_by: Any, content: Any,
                     metadata: Any) -> tuple[Any, str | None]:
    """3.11's artifact checks in its order (kind, created_by as a required routing field,
    content, metadata): the stripped writer and the first problem, or None."""
    if not isinstance(kind, str) or kind not in ARTIFACT_KINDS:
        return None, f"kind={kind!r} is not one of: {', '.join(ARTIFACT_KINDS)}"
    created_by, problem = _routing(created_by, "created_by")
    if created_by is None and problem is None:
        problem = "created_by must be a non-empty string"
    if problem is None and (not isinstance(content, str) or not content):
        problem = "content must be a non-empty string"
    if problem is None and "\x00" in content:
        problem = "content contains null bytes"
    if problem is None and metadata is not None and not isinstance(metadata, dict):
        problem = "metadata must be an object"
    return created_by, problem


def store_artifact(state: PalaceState, kind: str, content: str, created_by: Any,
                   metadata: Any, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """File an artifact; returns what 3.11 answers of it (its content stays in the palace)."""
    sha = sha256_hex(content)
    when = _now()
    artifact = {"id": f"art_{when.strftime('%Y%m%dT%H%M%S')}_{sha[:12]}", "kind": kind,
                "sha256": sha, "size_bytes": len(content.encode()),
                "created_by": created_by, "created_at": when.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "origin_replica": state.replica, **(extra or {})}
    state.artifacts.append({**artifact, "content": content, "metadata": metadata or {}})
    return artifact


@tool("mempalace_artifact_get", writes=True)
def _artifact_get(state: PalaceState, args: dict[str, Any]) -> dict[str, Any]:
    make_directory(state)
    if (problem := argument_problem("artifact_id", args["artifact_id"], "text")) is not None:
        return {"error": problem}
    for artifact in state.artifacts:
        if artifact["id"] == args["artifact_id"]:
            return {"artifact": artifact}  # 3.11: no success key here either
    return {"error": f"artifact '{args['artifact_id']}' not found"}  # 3.11: no success key


def _events_since(state: PalaceState,
                  args: dict[str, Any]) -> tuple[list[dict[str, Any]], list[Any]]:
    """The events after ``since_event_id`` (all of them when it names none), and the ids of
    all of them, in filing order."""
    events = list(state.events)
    ids = [e["id"] for e in events]
    if args.get("since_event_id") in ids:
        events = events[ids.index(args["since_event_id"]) + 1 :]
    return events, ids


@tool("mempalace_event_wait", writes=True)
def _event_wait(state: PalaceState, args: dict[str, Any]) -> dict[str, Any]:
    """3.11 lists what matches (oldest first, after ``since_event_id`` when given) and answers
    at once when anything does; the brain holds an empty answer for ``timeout_ms``."""
    make_directory(state)
    timeout = args.get("timeout_ms", 60_000)
    if not isinstance(timeout, (int, float)) or timeout < 0:
        return {"error": "timeout_ms must be a non-negative number"}
    args = {**args, "__events__": state.events}
    if (refused := _bad_filter(args)) is not None:
        return refused
    limit = args.get("limit", 50)
    if not isinstance(limit, int) or limit < 1:
        return {"error": "limit must be a positive integer"}
    events, _ = _events_since(state, args)
    events = [e for e in events if _event_selected(e, args)][:min(limit, 500)]
    result: dict[str, Any] = {"timed_out": not events, "events": events, "count": len(events)}
    if args.get("from_agent") and not args.get("writer"):
        result["note"] = EVENT_LIST_NOTE
    return result

