"""Hypothesis strategies for tool calls, read off each tool's own ``inputSchema``.

Every property gets values of its declared type (boundaries included) and values that break
it: numbers where strings go, lists where a name goes, non-object ``metadata``, bad dates,
``limit`` 0 and -1, NUL bytes, names with surrounding blanks, unicode, and long content
(about 15 kB, past the real server's chunk size). Required keys are sometimes left out and an
unknown key sometimes added. Paths are never drawn freely: a ``source``, ``project_dir`` or
``source_file`` is the world's mine source, a file in it, or a name that does not exist, so a
generated ``mine`` or ``sync`` never reads outside its world.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from palace_conformance.fidelity.targets import SOURCE_FILE
from palace_conformance.resources import fixtures_dir

#: names the initialised palace holds (the script's ``initialise`` steps), so reads find things
KNOWN_NAMES = ("probe", "notes", "probe-agent", "fidelity", "ran_on", "note", "general",
               "wing_probe-agent", "diary")
#: ids that look right but name nothing
UNKNOWN_IDS = ("drawer_probe_notes_000000000000000000000000", "nope",
               "evt_20260101T000000_000000000000", "art_20260101T000000_000000000000",
               "t_probe_ran_on_fidelity_000000000000", "")
DATES = ("2026-01-01", "2026-12-31T23:59:59Z", "2099-01-01", "1970-01-01", "2026-13-45",
         "yesterday", "", "01/02/2026", "2026-01-01T00:00:00+02:00")
PATH_KEYS = frozenset({"source", "project_dir", "source_file"})
DATE_KEYS = frozenset({"as_of", "valid_from", "valid_to", "ended", "at", "since", "before",
                       "after", "until"})
LONG_KEYS = frozenset({"content", "entry", "body", "goal"})
#: event_wait without a small timeout waits its default 60 s on both sides
CAPPED_INTEGERS = {("mempalace_event_wait", "timeout_ms"): (0, 50)}

LONG_TEXT = ("The palace keeps every word filed here verbatim. " * 320)[:15000]

_plain_text = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=24)


def load_tools(path: Path | None = None) -> list[dict[str, Any]]:
    """The 47 tools the real server lists (name, inputSchema), as the catalogue recorded them."""
    path = path or fixtures_dir() / "catalogue" / "mempalace-3.11.0-tools.json"
    tools: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))["tools"]
    return tools


def _wrong(kind: str) -> st.SearchStrategy[Any]:
    """Values of another JSON type than ``kind``."""
    pool: dict[str, list[Any]] = {
        "string": [12345, 1.5, True, None, ["probe"], {"a": 1}],
        "integer": ["5", 2.5, True, None, [1], "ten"],
        "number": ["0.9", True, None, [0.5]],
        "boolean": ["true", 1, 0, None, "no"],
        "array": ["probe", 3, {"a": 1}, None],
        "object": ["branch=main", [1, 2], 7, None, True],
    }
    return st.sampled_from(pool.get(kind, [None]))


def _string(tool: str, key: str, prop: dict[str, Any]) -> st.SearchStrategy[Any]:
    if "enum" in prop:
        return st.one_of(st.sampled_from(prop["enum"]),
                         st.sampled_from(["bogus", str(prop["enum"][0]).upper(), ""]))
    if key in PATH_KEYS:
        return st.sampled_from(["${SOURCE}", f"${{SOURCE}}/{SOURCE_FILE}", "${SOURCE}/missing",
                                "missing-dir", ""])
    if key in DATE_KEYS:
        return st.sampled_from(DATES)
    if key.endswith("_id") or key == "id":
        return st.sampled_from(UNKNOWN_IDS)
    options: list[st.SearchStrategy[Any]] = [
        st.sampled_from(KNOWN_NAMES),
        st.sampled_from(KNOWN_NAMES).map(lambda name: f"  {name} "),
        _plain_text,
        st.sampled_from(["a\x00b", "Ünïcødé ☃ 日本", "", " ", "x" * 300]),
    ]
    if key in LONG_KEYS:
        options.append(st.just(LONG_TEXT))
    return st.one_of(*options)


def _integer(tool: str, key: str, prop: dict[str, Any]) -> st.SearchStrategy[Any]:
    capped = CAPPED_INTEGERS.get((tool, key))
    if capped is not None:
        return st.integers(*capped)
    low, high = prop.get("minimum"), prop.get("maximum")
    edges = [0, -1, 1, 2, 5, 1000]
    edges += [v for v in (low, high) if isinstance(v, int)]
    edges += [v + d for v, d in ((low, -1), (high, 1)) if isinstance(v, int)]
    return st.sampled_from(sorted(set(edges)))


def value_for(tool: str, key: str, prop: dict[str, Any]) -> st.SearchStrategy[Any]:
    """A value for one property: mostly its own type, sometimes another."""
    kind = prop.get("type", "string")
    capped = (tool, key) in CAPPED_INTEGERS
    own: st.SearchStrategy[Any]
    if kind == "string":
        own = _string(tool, key, prop)
    elif kind == "integer":
        own = _integer(tool, key, prop)
    elif kind == "number":
        own = st.sampled_from([0, 0.0, 0.5, 0.9, 1, 1.5, -1])
    elif kind == "boolean":
        own = st.booleans()
    elif kind == "array":
        item = prop.get("items", {})
        if item.get("type") == "object":
            own = st.lists(object_for(tool, item), max_size=3)
        else:
            own = st.lists(value_for(tool, key.rstrip("s"), item), max_size=3)
    elif kind == "object":
        own = st.sampled_from([{}, {"branch": "main"}, {"n": 1, "nested": {"a": [1]}}])
    else:
        own = st.none()
    if capped:
        return own
    return st.one_of(own, own, own, _wrong(kind))


def object_for(tool: str, schema: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    """An arguments object: each property present or not, required ones mostly present."""
    properties: dict[str, Any] = schema.get("properties", {})
    required = set(schema.get("required", []))

    @st.composite
    def build(draw: st.DrawFn) -> dict[str, Any]:
        arguments: dict[str, Any] = {}
        for key, prop in properties.items():
            forced = (tool, key) in CAPPED_INTEGERS
            if forced or draw(st.integers(0, 9)) < (8 if key in required else 4):
                arguments[key] = draw(value_for(tool, key, prop))
        if draw(st.integers(0, 19)) == 0:
            arguments["unexpected_argument"] = draw(st.sampled_from([1, "x", None]))
        return arguments

    return build()


def call_for(tool: dict[str, Any]) -> st.SearchStrategy[tuple[str, dict[str, Any]]]:
    """One ``tools/call`` of this tool: (name, arguments)."""
    return object_for(tool["name"], tool.get("inputSchema", {})).map(
        lambda arguments: (tool["name"], arguments))


def every_tool(tools: list[dict[str, Any]]) -> st.SearchStrategy[list[tuple[str, dict[str, Any]]]]:
    """One call of each tool, in a drawn order (so every tool is reached equally often)."""
    return st.tuples(st.permutations(range(len(tools))),
                     st.tuples(*(call_for(tool) for tool in tools))).map(
        lambda drawn: [drawn[1][index] for index in drawn[0]])


def draw_calls(count: int, seed: int,
               tools: list[dict[str, Any]] | None = None) -> list[tuple[str, dict[str, Any]]]:
    """``count`` calls drawn by hypothesis from ``seed`` (the same seed, the same calls, for one
    hypothesis release), in rounds of one call per tool: its generate phase only, no example
    database; hypothesis's first example (every value its simplest) is left out."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as with_seed

    chosen = tools if tools is not None else load_tools()
    rounds: list[list[tuple[str, dict[str, Any]]]] = []
    wanted = -(-count // max(1, len(chosen)))

    @with_seed(seed)
    @settings(max_examples=wanted + 1, database=None, deadline=None,
              phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    @given(every_tool(chosen))
    def collect(calls: list[tuple[str, dict[str, Any]]]) -> None:
        rounds.append(calls)

    if count > 0:
        collect()
    return [call for calls in rounds[1:] + rounds[:1] for call in calls][:count]
