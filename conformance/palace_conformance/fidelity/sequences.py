"""Stateful sequences for ``fidelity --generated``: whole sessions drawn from a model of the
palace, sent to the real server and the fake side by side.

A sequence starts from a *fresh* palace (nothing on disk), a *half-made* one (a search has
made its directory, as 3.11 does) or an *initialised* one (the script's ``initialise``
writes), then runs 3 to ``MAX_STEPS`` calls drawn with what the session has done so far in
mind: it files drawers (short, just past the 800-character chunk size, 15 kB, duplicates,
names with blanks), then reads them back, updates, deletes, lists, searches and
de-duplicates them, mines the world's source then deletes by that source and syncs, writes
and reads the diary, checkpoints, adds, queries, invalidates and times knowledge-graph facts,
builds and follows tunnels, appends, lists and acknowledges events, asks for the mesh's
peers and reconnects. A call that names an earlier result (a drawer id, an event id, a
tunnel id) sends ``${ref:LABEL:PATH}``, which each target fills from its *own* earlier
answer (:func:`palace_conformance.fidelity.execute.answer_at`), so the sides never need the
same ids. Every step is a point compared through the fidelity rules.

A sequence whose steps differ is *shrunk*: steps before the first differing one are left
out, one at a time, while that step still differs the same way; the minimal sequence is
what the report shows and what ``generated_sequences.json`` keeps as a regression case.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from palace_conformance.fidelity.strategies import LONG_TEXT
from palace_conformance.fidelity.targets import SOURCE_FILE

SEQUENCES_FILE = Path(__file__).with_name("generated_sequences.json")
STARTS = ("fresh", "half-made", "initialised")
MIN_STEPS, MAX_STEPS = 3, 10

WINGS = ("alpha", "beta", "  alpha ", "Gamma Wing")
ROOMS = ("notes", "plans", "diary", " plans")
WORDS = ("palace", "memory", "drawer", "tunnel", "river", "lantern")
#: 900 characters: just past 3.11's chunk size (800), two chunks
PAST_CHUNK = ("Every drawer keeps its words. " * 30)[:900]
CONTENTS = ("The palace keeps the lantern by the river.", "A second memory about tunnels.",
            PAST_CHUNK, LONG_TEXT, "  padded content  ")
AGENTS = ("seq-agent", "Seq-Agent", "other")
SUBJECTS = ("Alice", "alice", "Bob", "the river")
PREDICATES = ("knows", "lives_in", "works on")
UNKNOWN_DRAWER = "drawer_alpha_notes_000000000000000000000000"

Arguments = dict[str, Any]


@dataclass(frozen=True)
class SeqStep:
    """One call of a sequence; ``label`` names it for later ``${ref:...}`` references."""

    label: str
    tool: str
    arguments: Arguments

    def to_json(self) -> dict[str, Any]:
        return {"label": self.label, "tool": self.tool, "arguments": self.arguments}


@dataclass(frozen=True)
class Sequence:
    """A start state and the calls made from it, in order."""

    start: str
    steps: tuple[SeqStep, ...]

    def to_json(self) -> dict[str, Any]:
        return {"start": self.start, "steps": [step.to_json() for step in self.steps]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Sequence:
        return cls(data["start"], tuple(SeqStep(raw["label"], raw["tool"], raw["arguments"])
                                        for raw in data["steps"]))


def ref(label: str, path: str) -> str:
    return "${ref:" + label + ":" + path + "}"


class _Model:
    """What the drawn session has done so far: the steps that filed drawers, events and
    tunnels (their labels, for references), the wings, rooms and contents it used."""

    def __init__(self) -> None:
        self.drawers: list[str] = []  # labels of add_drawer / diary steps
        self.events: list[str] = []
        self.tunnels: list[str] = []
        self.contents: list[str] = []
        self.places: list[tuple[str, str]] = []


def _add_drawer(draw: st.DrawFn, model: _Model, label: str) -> tuple[str, Arguments]:
    wing, room = draw(st.sampled_from(WINGS)), draw(st.sampled_from(ROOMS))
    if model.contents and draw(st.integers(0, 4)) == 0:
        content = draw(st.sampled_from(model.contents))  # the same drawer again
    else:
        content = draw(st.sampled_from(CONTENTS))
    arguments: Arguments = {"wing": wing, "room": room, "content": content}
    if draw(st.integers(0, 3)) == 0:
        arguments["source_file"] = f"${{SOURCE}}/{SOURCE_FILE}"
    model.drawers.append(label)
    model.contents.append(content)
    model.places.append((wing.strip(), room.strip()))
    return "mempalace_add_drawer", arguments


def _drawer_ref(draw: st.DrawFn, model: _Model) -> Any:
    if model.drawers and draw(st.integers(0, 5)) > 0:
        return ref(draw(st.sampled_from(model.drawers)), "drawer_id")
    return UNKNOWN_DRAWER


def _place(draw: st.DrawFn, model: _Model) -> tuple[str, str]:
    reuse: bool = draw(st.booleans())
    if model.places and reuse:
        place: tuple[str, str] = draw(st.sampled_from(model.places))
        return place
    return draw(st.sampled_from(WINGS)).strip(), draw(st.sampled_from(ROOMS)).strip()


def _step(draw: st.DrawFn, model: _Model, label: str) -> tuple[str, Arguments]:
    """One call, drawn with the model in mind (writes early weigh more, so reads find
    something)."""
    kind = draw(st.sampled_from((
        "add", "add", "add", "get", "get_many", "update", "delete", "delete_many", "list",
        "wings", "rooms", "taxonomy", "status", "search", "duplicate", "mine", "by_source",
        "sync", "diary_write", "diary_read", "checkpoint", "kg_add", "kg_query",
        "kg_invalidate", "kg_timeline", "kg_stats", "tunnel", "tunnels", "find_tunnels",
        "follow", "traverse", "graph", "event", "events", "ack", "mesh", "reconnect")))
    if kind in _NO_ARGUMENTS:
        return _NO_ARGUMENTS[kind], {}
    if kind in _DRAWER_KINDS:
        return _drawer_step(draw, model, label, kind)
    return _graph_step(draw, model, label, kind)


#: the calls drawn with no arguments, by kind
_NO_ARGUMENTS = {"wings": "mempalace_list_wings", "taxonomy": "mempalace_get_taxonomy",
                 "status": "mempalace_status", "kg_timeline": "mempalace_kg_timeline",
                 "kg_stats": "mempalace_kg_stats", "tunnels": "mempalace_list_tunnels",
                 "find_tunnels": "mempalace_find_tunnels", "graph": "mempalace_graph_stats",
                 "mesh": "mempalace_mesh_peers", "reconnect": "mempalace_reconnect"}
#: the calls on one drawer, on one to three drawers, and the listings of one wing or all, by kind
_ONE_DRAWER = {"get": "mempalace_get_drawer", "delete": "mempalace_delete_drawer"}
_SOME_DRAWERS = {"get_many": "mempalace_get_drawers", "delete_many": "mempalace_delete_drawers"}
_BY_WING = {"list": "mempalace_list_drawers", "rooms": "mempalace_list_rooms"}
#: the kinds :func:`_drawer_step` draws (drawers, their listings, search, mining)
_DRAWER_KINDS = ("add", "get", "get_many", "update", "delete", "delete_many", "list", "rooms",
                 "search", "duplicate", "mine", "by_source", "sync")


def _drawer_step(draw: st.DrawFn, model: _Model, label: str,
                 kind: str) -> tuple[str, Arguments]:
    """A call on drawers: added, read, changed, listed, searched or mined."""
    if kind == "add":
        return _add_drawer(draw, model, label)
    if kind in _ONE_DRAWER:
        return _ONE_DRAWER[kind], {"drawer_id": _drawer_ref(draw, model)}
    if kind in _SOME_DRAWERS:
        ids = [_drawer_ref(draw, model) for _ in range(draw(st.integers(1, 3)))]
        return _SOME_DRAWERS[kind], {"drawer_ids": ids}
    if kind in _BY_WING:
        wing = draw(st.sampled_from((None, *WINGS)))
        return _BY_WING[kind], ({"wing": wing} if wing else {})
    if kind == "update":
        changes: Arguments = {}
        if draw(st.booleans()):
            changes["content"] = draw(st.sampled_from(CONTENTS))
        if draw(st.booleans()):
            changes["wing"] = draw(st.sampled_from(WINGS))
        if draw(st.booleans()):
            changes["room"] = draw(st.sampled_from(ROOMS))
        return "mempalace_update_drawer", {"drawer_id": _drawer_ref(draw, model), **changes}
    if kind == "search":
        arguments: Arguments = {"query": draw(st.sampled_from(WORDS)), "limit": 3}
        if draw(st.booleans()):
            arguments["wing"] = draw(st.sampled_from(WINGS))
        return "mempalace_search", arguments
    if kind == "duplicate":
        content = draw(st.sampled_from(model.contents or list(CONTENTS)))
        return "mempalace_check_duplicate", {"content": content, "threshold": 0.9}
    if kind == "mine":
        arguments = {"source": "${SOURCE}"}
        if draw(st.booleans()):
            arguments["wing"] = draw(st.sampled_from(WINGS)).strip()
        if draw(st.booleans()):
            arguments["dry_run"] = True
        return "mempalace_mine", arguments
    if kind == "by_source":
        return "mempalace_delete_by_source", {"source_file": f"${{SOURCE}}/{SOURCE_FILE}",
                                              "dry_run": draw(st.booleans())}
    if kind == "sync":
        return "mempalace_sync", {"project_dir": "${SOURCE}"}
    raise AssertionError(kind)


def _graph_step(draw: st.DrawFn, model: _Model, label: str,
                kind: str) -> tuple[str, Arguments]:
    """A call on the diary, the knowledge graph, tunnels or events."""
    if kind == "diary_write":
        model.drawers.append(label)
        entry = draw(st.sampled_from(CONTENTS))
        return "mempalace_diary_write", {"agent_name": draw(st.sampled_from(AGENTS)),
                                         "entry": entry, "topic": "seq"}
    if kind == "diary_read":
        return "mempalace_diary_read", {"agent_name": draw(st.sampled_from(AGENTS))}
    if kind == "checkpoint":
        wing, room = _place(draw, model)
        items = [{"wing": wing, "room": room, "content": draw(st.sampled_from(CONTENTS))}
                 for _ in range(draw(st.integers(1, 2)))]
        model.places.append((wing, room))
        checkpoint: Arguments = {"items": items}
        if draw(st.booleans()):
            checkpoint["diary"] = {"agent_name": draw(st.sampled_from(AGENTS)),
                                   "entry": "checkpoint diary entry"}
        return "mempalace_checkpoint", checkpoint
    if kind in ("kg_add", "kg_invalidate"):
        fact = {"subject": draw(st.sampled_from(SUBJECTS)),
                "predicate": draw(st.sampled_from(PREDICATES)),
                "object": draw(st.sampled_from(SUBJECTS))}
        return f"mempalace_{kind}", fact
    if kind == "kg_query":
        return "mempalace_kg_query", {"entity": draw(st.sampled_from(SUBJECTS))}
    if kind == "tunnel":
        (source_wing, source_room), (target_wing, target_room) = (_place(draw, model),
                                                                  _place(draw, model))
        model.tunnels.append(label)
        return "mempalace_create_tunnel", {"source_wing": source_wing,
                                           "source_room": source_room,
                                           "target_wing": target_wing,
                                           "target_room": target_room, "label": "seq"}
    if kind == "follow":
        wing, room = _place(draw, model)
        return "mempalace_follow_tunnels", {"wing": wing, "room": room}
    if kind == "traverse":
        return "mempalace_traverse", {"start_room": _place(draw, model)[1], "max_hops": 2}
    if kind == "event":
        model.events.append(label)
        return "mempalace_event_append", {"type": "note", "stream": "seq", "room": "general",
                                          "from_agent": draw(st.sampled_from(AGENTS)),
                                          "body": draw(st.sampled_from(WORDS))}
    if kind == "events":
        return "mempalace_event_list", {"stream": "seq", "order": "asc"}
    if kind == "ack":
        event = (ref(draw(st.sampled_from(model.events)), "event.id") if model.events
                 else "evt_20260101T000000_000000000000")
        return "mempalace_event_ack", {"event_id": event, "from_agent": "other"}
    raise AssertionError(kind)


@st.composite
def sequence(draw: st.DrawFn) -> Sequence:
    """A start state and a drawn run of calls from it."""
    start = draw(st.sampled_from(STARTS))
    model = _Model()
    steps = []
    for index in range(draw(st.integers(MIN_STEPS, MAX_STEPS))):
        label = f"s{index:02d}"
        tool, arguments = _step(draw, model, label)
        steps.append(SeqStep(label, tool, arguments))
    return Sequence(start, tuple(steps))


def draw_sequences(count: int, seed: int) -> list[Sequence]:
    """``count`` sequences drawn by hypothesis from ``seed`` (generate phase only, no
    example database; the same seed, the same sequences for one hypothesis release)."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as with_seed

    drawn: list[Sequence] = []

    @with_seed(seed)
    @settings(max_examples=count + 1, database=None, deadline=None,
              phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    @given(sequence())
    def collect(one: Sequence) -> None:
        drawn.append(one)

    if count > 0:
        collect()
    return (drawn[1:] + drawn[:1])[:count]


def load_sequences(path: Path = SEQUENCES_FILE) -> list[dict[str, Any]]:
    """The fixed regression sequences: each a shrunk counterexample and why it was kept."""
    cases: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))["sequences"]
    return cases


def shorter(seq: Sequence, keep: str) -> list[Sequence]:
    """The sequence with one step before ``keep`` left out (each such step in turn), and
    with every step after ``keep`` left out."""
    labels = [step.label for step in seq.steps]
    last = labels.index(keep)
    candidates = []
    if last < len(labels) - 1:
        candidates.append(Sequence(seq.start, seq.steps[:last + 1]))
    for index in range(last):
        candidates.append(Sequence(seq.start, seq.steps[:index] + seq.steps[index + 1:last + 1]))
    return candidates
