"""A run's translation wrapped around the driver client: the identity without a profile (or for a
fake subject), the profile's names, envelope and channels with one; judged on what a real host
process received and answered."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from palace_conformance.runner.execution.driver import DriverClient
from palace_conformance.runner.execution.translation import (
    ProfileTranslation,
    TranslatedDriver,
    translation_for,
)
from palace_conformance.runner.profile import Profile, load_profile

#: a driver host that answers every op in a fixed way and echoes what it was sent
HOST = r"""
import json, sys
for line in sys.stdin:
    request = json.loads(line)
    op, result, effects = request["op"], None, []
    if op == "hello":
        result = {"protocol": 1, "capabilities": ["stdio"]}
    elif op == "list_tools":
        result = [{"name": "palace_search", "inputSchema": {}}, {"name": "palace_where"}]
        effects = [{"kind": "tool_registered", "name": "palace_status"}]
    elif op == "call_tool":
        text = json.dumps({"data": {"called": request["name"]}})
        result = {"content": [{"type": "text", "text": text}]}
    elif op == "event":
        given = request["payload"]["systemPrompt"]
        result = {"system_prompt": given + "\n\nwake text"}
    print(json.dumps({"id": request["id"], "ok": True, "result": result, "effects": effects}),
          flush=True)
"""

PROFILE = {"tools": {"map": {"palace_search": "mempalace_search",
                             "palace_status": "mempalace_status"}, "extra_allowed": True},
           "results": {"path": "/data"}, "channels": {"wakeup": "system_prompt"}}


def _profile(tmp_path: Path) -> Profile:
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"schema_version": 1, "name": "p", "entry": "reference",
                                **PROFILE}))
    return load_profile(path)


def _exchanges(tmp_path: Path, profile: Profile | None) -> tuple[list[Any], TranslatedDriver]:
    """A search call, a tool listing and a ``before_agent_start`` through the wrapped client."""
    script = tmp_path / "host.py"
    script.write_text(HOST)
    driver = TranslatedDriver(DriverClient([sys.executable, str(script)], cwd=tmp_path,
                                           warm=False), translation_for(profile))
    out: list[Any] = []
    try:
        driver.start()
        driver.hello(10000)
        for op, fields in (("call_tool", {"name": "mempalace_search", "args": {}}),
                           ("list_tools", {}),
                           ("event", {"name": "before_agent_start",
                                      "payload": {"systemPrompt": "You are pi."}})):
            sent = driver.outgoing(op, fields)
            reply = driver.request(op, sent, deadline_ms=5000)
            out.append((sent, reply.result, reply.effects))
    finally:
        driver.close()
    return out, driver


def test_without_a_profile_every_request_and_reply_passes_as_it_is(tmp_path: Path) -> None:
    (call, listing, event), driver = _exchanges(tmp_path, None)
    sent, result, _ = call
    assert sent == {"name": "mempalace_search", "args": {}}
    assert json.loads(result["content"][0]["text"]) == {"data": {"called": "mempalace_search"}}
    assert [t["name"] for t in listing[1]] == ["palace_search", "palace_where"]
    assert listing[2] == [{"kind": "tool_registered", "name": "palace_status"}]
    assert event[2] == []  # no wake-up read from the system prompt
    assert driver.translation.notes([], 0) == []


def test_a_profile_translates_both_ways_around_the_client(tmp_path: Path) -> None:
    (call, listing, event), driver = _exchanges(tmp_path, _profile(tmp_path))
    sent, result, _ = call
    assert sent == {"name": "palace_search", "args": {}}  # the bridge's name on the wire
    # the host saw its own name; the result is the palace's JSON inside the envelope
    assert json.loads(result["content"][0]["text"]) == {"called": "palace_search"}
    assert json.loads(result["envelope"]) == {"data": {"called": "palace_search"}}
    assert [t["name"] for t in listing[1]] == ["mempalace_search"]
    assert listing[2] == [{"kind": "tool_registered", "name": "mempalace_status"}]
    assert event[2] == [{"kind": "injected", "custom_type": "mempalace-wakeup",
                         "content": "wake text", "via": "system_prompt"}]
    assert driver.translation.notes([], 0) == [
        "extra tools, allowed by the profile: palace_where"]


def test_the_fake_as_subject_is_never_translated(tmp_path: Path) -> None:
    profile = _profile(tmp_path)
    assert isinstance(translation_for(profile), ProfileTranslation)
    assert type(translation_for(profile, "fake")) is not ProfileTranslation
    assert translation_for(profile, "fake").catalogue is None
    assert translation_for(profile).claimed_capabilities is None  # the profile claims none
