"""PROV-*: the writer stamped at the edge, only on a shared palace, never over an explicit one."""

from __future__ import annotations

import copy
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from palace_bridge.config import BridgeConfig
from palace_bridge.features.provenance import WRITER_FIELDS, Stamper, stamper_for

SHARED = {"MEMPALACE_PI_DEVICE": "tor-ms22", "MEMPALACE_REMOTE_URL": "https://palace/mcp"}
ON = Stamper("tor-ms22")


def configured(env: dict[str, str]) -> Stamper:
    config = BridgeConfig.from_env(env)
    return stamper_for(config.device, config.shared_palace, config.harness)


@pytest.mark.parametrize(("tool", "args", "field"), [
    ("mempalace_add_drawer", {"wing": "w", "room": "r", "content": "c"}, "added_by"),
    ("mempalace_checkpoint", {"items": [{"wing": "w", "room": "r", "content": "c"}]}, "added_by"),
    ("mempalace_mine", {"source": "/x", "wing": "w"}, "agent"),
    ("mempalace_event_append", {"type": "t", "stream": "s", "room": "r"}, "from_agent"),
    ("mempalace_artifact_put", {"kind": "note", "content": "c"}, "created_by"),
])
def test_writer_is_stamped_when_unset(tool: str, args: dict, field: str) -> None:
    before = copy.deepcopy(args)
    stamped = configured(SHARED).stamp(tool, args)
    assert stamped[field] == "pi@tor-ms22"
    assert {k: v for k, v in stamped.items() if k != field} == before
    assert args == before  # the caller's dict is never mutated


def test_mine_gets_agent_not_added_by() -> None:
    # 3.11's mine schema has no added_by: sending it would be refused with -32602
    stamped = ON.stamp("mempalace_mine", {"source": "/x"})
    assert "added_by" not in stamped and stamped["agent"] == "pi@tor-ms22"


@pytest.mark.parametrize("empty", [None, "", "   "])
def test_an_empty_writer_counts_as_unset(empty: object) -> None:
    assert ON.stamp("mempalace_add_drawer", {"added_by": empty})["added_by"] == "pi@tor-ms22"


@pytest.mark.parametrize("tool", sorted(WRITER_FIELDS))
def test_an_explicit_writer_is_kept(tool: str) -> None:
    args = {WRITER_FIELDS[tool]: "pi@other-box", "x": 1}
    assert ON.stamp(tool, args) is args


def test_diary_entry_gets_the_host_prefix() -> None:
    args = {"agent_name": "pi", "entry": "SESSION:did.things"}
    assert ON.stamp("mempalace_diary_write", args)["entry"] == "HOST:tor-ms22|SESSION:did.things"


def test_diary_content_alias_is_prefixed_when_entry_is_absent() -> None:
    stamped = ON.stamp("mempalace_diary_write", {"agent_name": "pi", "content": "x"})
    assert stamped == {"agent_name": "pi", "content": "HOST:tor-ms22|x"}


def test_diary_entry_wins_over_content_like_the_server() -> None:
    stamped = ON.stamp("mempalace_diary_write", {"agent_name": "pi", "entry": "e", "content": "c"})
    assert stamped == {"agent_name": "pi", "entry": "HOST:tor-ms22|e", "content": "c"}


def test_diary_entry_already_attributed_is_kept() -> None:
    args = {"agent_name": "pi", "entry": "HOST:laptop|written for the laptop"}
    assert ON.stamp("mempalace_diary_write", args) is args


def test_custom_harness_name() -> None:
    assert Stamper("box", harness="opencode").stamp("mempalace_mine", {})["agent"] == "opencode@box"


@pytest.mark.parametrize("env", [
    {},
    {"MEMPALACE_PI_DEVICE": "tor-ms22"},
    {"MEMPALACE_REMOTE_URL": "https://palace/mcp"},
    {"MEMPALACE_PI_DEVICE": "", "MEMPALACE_REMOTE_URL": "https://palace/mcp"},
])
@pytest.mark.parametrize("tool", [*sorted(WRITER_FIELDS), "mempalace_diary_write"])
def test_either_gate_missing_passes_arguments_unchanged(env: dict, tool: str) -> None:
    args = {"agent_name": "pi", "entry": "e", "wing": "w", "n": 7, "nested": {"a": [1, 2.5]}}
    text = json.dumps(args)
    out = configured(env).stamp(tool, args)
    assert out is args and json.dumps(out) == text


def test_reads_are_never_touched() -> None:
    args = {"query": "x", "limit": 5}
    assert ON.stamp("mempalace_search", args) is args


json_values = (st.none() | st.booleans() | st.integers(-3, 9)
               | st.sampled_from(["", "  ", "x", "HOST:a|b", "pi@box"])
               | st.lists(st.integers(0, 3), max_size=2)
               | st.dictionaries(st.sampled_from(["a", "b"]), st.integers(0, 3), max_size=2))
tool_names = st.sampled_from([*sorted(WRITER_FIELDS), "mempalace_diary_write",
                              "mempalace_search", "mempalace_kg_add"])


@settings(max_examples=200, deadline=None)
@given(tool=tool_names, args=st.dictionaries(
    st.sampled_from(["added_by", "agent", "from_agent", "created_by", "entry", "content", "x"]),
    json_values, max_size=5))
def test_stamping_only_ever_touches_the_writer_field(tool: str, args: dict) -> None:
    before = json.dumps(args, sort_keys=True)
    stamped = ON.stamp(tool, args)
    assert json.dumps(args, sort_keys=True) == before
    missing = object()
    changed = {k for k in set(args) | set(stamped)
               if args.get(k, missing) != stamped.get(k, missing)}
    allowed = {WRITER_FIELDS[tool]} if tool in WRITER_FIELDS else set()
    if tool == "mempalace_diary_write":
        allowed = {"entry", "content"}
    assert changed <= allowed
    assert len(changed) <= 1
    assert Stamper(None).stamp(tool, args) is args
