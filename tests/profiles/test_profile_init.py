"""``profile init``: the name heuristics, the derivation (observations in, draft out), the
observation session, the reference bridge end to end, and one-line usage errors.

The TypeScript bridges are drafted in ``tests/ts/test_profile_init.py`` (they need Node).
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
from tests.runner.support import scripted

from palace_conformance.cli import main
from palace_conformance.resources import tool_catalogue
from palace_conformance.runner.profile import load_profile
from palace_conformance.runner.profiling.derive import derive, profile_entry
from palace_conformance.runner.profiling.matching import (
    SEED_KNOBS,
    guess_knob,
    looks_like_knob,
    match_knobs,
    match_tools,
)
from palace_conformance.runner.profiling.observe import (
    STATUS_TOOL,
    Session,
    observation_scenario,
    observe,
)
from palace_conformance.runner.results import ScenarioResult, StepRecord
from palace_conformance.scenarios.schema import schema_problems

REPO = Path(__file__).resolve().parents[2]
CATALOGUE = tool_catalogue()["tools"]
SCHEMAS = {t["name"]: t["inputSchema"] for t in CATALOGUE}


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as done:
        main(["profile", "init", *args])
    out, err = capsys.readouterr()
    return int(done.value.code or 0), out, err


def valid(profile: dict[str, Any]) -> None:
    assert schema_problems(profile, "bridge-profile.schema.json") == []


# -- name heuristics -----------------------------------------------------------------------------

def test_the_seed_knob_list_is_the_reference_bridges() -> None:
    source = (REPO / "reference" / "palace_bridge" / "config.py").read_text()
    assert set(re.findall(r'"(MEMPALACE_[A-Z_]+)"', source)) == set(SEED_KNOBS)


@pytest.mark.parametrize(("name", "seed", "unit"), [
    ("PALACE_TOOL_TIMEOUT_S", "MEMPALACE_MCP_TIMEOUT_MS", "s"),
    ("PYSPAWN_TIMEOUT_MS", "MEMPALACE_MCP_TIMEOUT_MS", "ms"),
    ("MYPAL_HANDSHAKE_TIMEOUT_SECONDS", "MEMPALACE_MCP_INIT_TIMEOUT_MS", "s"),
    ("PALACE_MAX_RESTARTS", "MEMPALACE_MCP_MAX_RESPAWNS", "ms"),
    ("PALACE_RESTART_DELAY_MS", "MEMPALACE_MCP_RESPAWN_BACKOFF_MS", "ms"),
    ("PALACE_DEBUG", "MEMPALACE_EXT_DEBUG", "ms"),
    ("MP_FEED_MINE_TIMEOUT_MS", "MEMPALACE_FEED_MINE_TIMEOUT_MS", "ms"),
    ("MP_FEED", "MEMPALACE_FEED", "ms"),
    ("MP_MAILBOX_POLL_MS", "MEMPALACE_MAILBOX_POLL_MS", "ms"),
    ("MP_SERVER_URL", "MEMPALACE_REMOTE_URL", "ms"),
])
def test_a_knob_name_is_guessed_from_its_words(name: str, seed: str, unit: str) -> None:
    guess = guess_knob(name)
    assert guess is not None and (guess.seed, guess.unit) == (seed, unit)
    assert looks_like_knob(name)


@pytest.mark.parametrize("name", ["PATH", "HOME", "DEBUG", "NODE_DEBUG", "PI_CODING_AGENT_DIR",
                                  "MEMPALACE_PALACE_PATH", "TERM_PROGRAM", "LANG"])
def test_the_runtimes_variables_are_no_knobs(name: str) -> None:
    assert not looks_like_knob(name)


def test_a_strong_name_beats_a_loose_one_and_a_knob_read_beside_the_seeds_is_kept() -> None:
    found = match_knobs(["PALACE_REQUEST_TIMEOUT_MS", "PALACE_TOOL_TIMEOUT_S", "PATH"])
    assert found.mapped["MEMPALACE_MCP_TIMEOUT_MS"].env == "PALACE_TOOL_TIMEOUT_S"
    assert [name for name, _ in found.unmapped] == ["PALACE_REQUEST_TIMEOUT_MS"]
    # read beside the seed's own name (whichever it prefers): still mapped, in seconds, so the
    # run gives both the scenario's value
    found = match_knobs(["MEMPALACE_MCP_TIMEOUT_MS", "PALACE_TOOL_TIMEOUT_S"])
    guess = found.mapped["MEMPALACE_MCP_TIMEOUT_MS"]
    assert (guess.env, guess.unit, found.unmapped) == ("PALACE_TOOL_TIMEOUT_S", "s", [])


def test_tools_are_matched_by_call_name_schema_and_similar_name() -> None:
    registered = {
        "palace_search": SCHEMAS["mempalace_search"],  # same schema as exactly one tool
        "palace_save": SCHEMAS["mempalace_add_drawer"],
        "palace_status": {"type": "object", "properties": {}},  # shared schema, similar name
        "palace_where": {"type": "object", "properties": {}},  # shared schema, nothing alike
        "mcp__palace__mempalace_kg_query": {"type": "object"},  # catalogue name inside
        "remember": {"type": "object", "properties": {"x": {"type": "string"}}},
        "mempalace_status": SCHEMAS["mempalace_status"],  # a catalogue tool: no entry
    }
    found = match_tools(registered, CATALOGUE, called={"remember": "mempalace_diary_write"})
    assert found.mapped == {"palace_search": "mempalace_search",
                            "palace_save": "mempalace_add_drawer",
                            "palace_status": "mempalace_status",
                            "mcp__palace__mempalace_kg_query": "mempalace_kg_query",
                            "remember": "mempalace_diary_write"}
    assert found.unmatched == ["palace_where"]


# -- derivation: observations in, draft out ------------------------------------------------------

def session(transport: str, **fields: Any) -> Session:
    return Session.from_json({"transport": transport, "observed": True, **fields})


def test_a_knob_bridge_drafts_its_knob_map_and_notes_what_it_never_read() -> None:
    reads = ["PALACE_DEBUG", "PALACE_MAX_RESTARTS", "PALACE_REQUEST_TIMEOUT_MS",
             "PALACE_RESTART_DELAY_MS", "PALACE_TOOL_TIMEOUT_S", "PATH"]
    tools = {name: schema for name, schema in SCHEMAS.items()}
    draft = derive("pi-extension:/x/knobs.ts", [
        session("stdio", reached=True, env_reads=reads, tools=tools,
                spawned=[{"argv": ["mempalace-mcp"]}]),
        session("http", reached=False, env_reads=reads, tools=tools,
                spawned=[{"argv": ["mempalace-mcp"]}]),
    ], CATALOGUE)
    profile = draft.profile
    valid(profile)
    assert profile["entry"] == "pi-extension:/x/knobs.ts"
    assert profile["name"].startswith("knobs ") and "draft" in profile["name"]
    assert profile["claims"] == {"capabilities": ["stdio"], "seed_copy": False}
    assert profile["knobs"] == {
        "MEMPALACE_MCP_TIMEOUT_MS": {"env": "PALACE_TOOL_TIMEOUT_S", "unit": "s"},
        "MEMPALACE_MCP_MAX_RESPAWNS": {"env": "PALACE_MAX_RESTARTS"},
        "MEMPALACE_MCP_RESPAWN_BACKOFF_MS": {"env": "PALACE_RESTART_DELAY_MS"},
        "MEMPALACE_EXT_DEBUG": {"env": "PALACE_DEBUG"},
    }
    assert "tools" not in profile and "path_programs" not in profile and "files" not in profile
    notes = "\n".join(draft.notes)
    assert "PALACE_REQUEST_TIMEOUT_MS is not mapped" in notes
    assert "never read MEMPALACE_MCP_INIT_TIMEOUT_MS" in notes
    assert "http session never reached the fake" in notes
    assert "seed_copy" in notes


def test_a_settings_file_bridge_drafts_the_files_it_looked_for() -> None:
    looked = [{"path": ".pi/agent/mempalace.json", "ops": ["read"]},
              {"path": ".mempalace/token", "ops": ["exists", "read"]},
              {"path": "../escape", "ops": ["read"]}]
    draft = derive("pi-extension:/x/configfile.ts", [
        session("stdio", files=looked, stderr=1), session("http", files=looked, stderr=1),
    ], CATALOGUE)
    profile = draft.profile
    valid(profile)
    assert [f["path"] for f in profile["files"]] == ["${HOME}/.mempalace/token",
                                                     "${HOME}/.pi/agent/mempalace.json"]
    assert "json" in profile["files"][1] and "content" in profile["files"][0]
    assert profile["claims"]["capabilities"] == []
    assert profile["channels"] == {"diagnostics": "stderr"}
    assert any("placeholder content" in n for n in draft.notes)
    assert any("settings file filled in first" in n for n in draft.notes)


def test_a_curated_bridge_drafts_its_tool_map_and_allows_the_extra_tool() -> None:
    tools = {"palace_where": {"type": "object", "properties": {}},
             "palace_search": SCHEMAS["mempalace_search"],
             "palace_save": SCHEMAS["mempalace_add_drawer"],
             "palace_status": SCHEMAS["mempalace_status"]}
    draft = derive("pi-extension:/x/curated.ts", [
        session("stdio", tools={"palace_where": tools["palace_where"]}),
        session("http", reached=True, tools=tools, call="palace_status",
                called={"palace_status": "mempalace_status"},
                env_reads=["MEMPALACE_REMOTE_URL", "MEMPALACE_REMOTE_TOKEN"]),
    ], CATALOGUE)
    valid(draft.profile)
    assert draft.profile["tools"] == {"map": {"palace_save": "mempalace_add_drawer",
                                              "palace_search": "mempalace_search",
                                              "palace_status": "mempalace_status"},
                                      "extra_allowed": True}
    assert draft.profile["claims"]["capabilities"] == ["http"]
    assert not any("MAX_RESPAWNS" in n for n in draft.notes)  # respawns matter on stdio only


def test_channels_capabilities_and_programs_come_from_what_the_bridge_did() -> None:
    draft = derive("my-host --flag", [
        session("stdio", reached=True, notify=2, system_prompt=True,
                events=["session_start", "before_agent_start", "agent_settled"],
                commands=["palace-diary"], env_reads=["MEMPALACE_PI_DEVICE"],
                spawned=[{"argv": ["my-palace-mcp"], "error": "ENOENT"},
                         {"argv": ["git", "status"]}, {"argv": ["python3", "-c", "x"]},
                         {"argv": ["/usr/bin/palace-mcp"], "error": "ENOENT"},
                         {"argv": ["mempalace-mcp"]}],
                ran=[["mempalace-pi-session", "--prepare"]]),
    ], CATALOGUE)
    profile = draft.profile
    valid(profile)
    assert profile["name"].startswith("my-host ")
    assert profile["entry"] == "my-host --flag"
    assert profile["claims"]["capabilities"] == ["stdio", "wakeup", "diary_command",
                                                 "provenance"]
    assert profile["channels"] == {"wakeup": "system_prompt", "diagnostics": "notify"}
    assert profile["path_programs"] == ["my-palace-mcp"]
    notes = "\n".join(draft.notes)
    assert "it also ran git" in notes and "/mempalace-diary" in notes
    assert "provenance inferred from reading MEMPALACE_PI_DEVICE" in notes


def test_a_session_that_could_not_run_is_a_note() -> None:
    draft = derive("reference", [
        session("stdio", reached=True, injected=True, events=["before_agent_start"]),
        Session("http", status="not_applicable", reason="the host does not declare http"),
    ], CATALOGUE)
    valid(draft.profile)
    assert draft.profile["claims"]["capabilities"] == ["stdio", "wakeup"]
    assert draft.profile["channels"]["wakeup"] == "message"
    assert "http: no observation (the host does not declare http)" in draft.notes


def test_an_extension_entry_is_relative_to_the_profiles_folder(tmp_path: Path) -> None:
    extension = tmp_path / "bridges" / "mine.ts"
    extension.parent.mkdir()
    extension.write_text("export default () => {};\n")
    out = tmp_path / "profiles"
    entry = profile_entry(f"pi-extension:{extension}?capabilities=stdio", out)
    assert entry == "pi-extension:../bridges/mine.ts?capabilities=stdio"
    draft = derive(f"pi-extension:{extension}", [session("stdio")], CATALOGUE, out_dir=out)
    out.mkdir()
    (out / "mine.profile.json").write_text(json.dumps(draft.profile))
    assert load_profile(out / "mine.profile.json").bridge == f"pi-extension:{extension}"
    assert profile_entry(f"pi-extension:{extension}", None) == f"pi-extension:{extension}"


# -- the observation session ---------------------------------------------------------------------

def test_the_observation_session_is_no_catalogue_scenario() -> None:
    scenario = observation_scenario()
    assert [s.op for s in scenario.steps] == ["load", "event", "settle", "event", "settle",
                                              "list_tools", "call_tool", "shutdown", "introspect"]
    assert scenario.steps[6].params["name"] == STATUS_TOOL
    assert scenario.transports == ("stdio", "http") and scenario.http.token


def canned(transport: str, tools: list[str], call: str) -> ScenarioResult:
    call_ok = call in tools
    steps = [StepRecord(0, "load", "load", ran=True, ok=True,
                        result={"tools": tools, "commands": [], "events": []}),
             StepRecord(5, "tools", "list_tools", ran=True, ok=True,
                        result=[{"name": n, "parameters": SCHEMAS.get(n, {})} for n in tools]),
             StepRecord(6, "call", "call_tool", ran=True, ok=call_ok, request={"name": call},
                        error=None if call_ok else {"kind": "no_such_tool"}),
             StepRecord(8, "introspect", "introspect", ran=True, ok=True,
                        result={"observed": {"env_reads": ["A_TIMEOUT_MS"]}})]
    return ScenarioResult("profile-init.observe", transport, "passed", steps=steps)


def test_a_bridge_without_mempalace_status_is_observed_again_calling_its_own_name() -> None:
    calls: list[tuple[str, str]] = []

    def runner(scenario: Any, transport: str, options: Any) -> ScenarioResult:
        [call] = [s for s in scenario.steps if s.op == "call_tool"]
        calls.append((transport, call.params["name"]))
        return canned(transport, ["palace_status"], call.params["name"])

    sessions = observe(["host"], CATALOGUE, transports=("stdio",), runner=runner)
    assert calls == [("stdio", "mempalace_status"), ("stdio", "palace_status")]
    assert (sessions[0].call, sessions[0].call_error) == ("palace_status", None)
    assert sessions[0].env_reads == ["A_TIMEOUT_MS"] and sessions[0].observed


# -- the reference bridge, end to end ------------------------------------------------------------

def test_the_reference_bridge_drafts_the_seed_with_every_capability(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "reference.profile.json"
    observations = tmp_path / "observed.json"
    code, stdout, err = cli(capsys, "--bridge", "reference", "--out", str(out),
                            "--observations", str(observations))
    assert code == 0, err
    assert stdout == ""
    profile = json.loads(out.read_text())
    valid(profile)
    assert load_profile(out).bridge == "reference"
    assert profile["claims"] == {"capabilities": ["stdio", "http", "wakeup", "feeding",
                                                  "diary_command", "provenance", "mailbox",
                                                  "session_preamble", "keepalive"],
                                 "seed_copy": False}
    # the seed's own names, the seed's own tools, nothing to fill: identity everywhere
    assert not {"knobs", "files", "path_programs", "tools"} & profile.keys()
    assert profile["channels"]["wakeup"] == "message"
    assert err.splitlines()[0].startswith("palace-conformance profile init: DRAFT profile "
                                          f"written to {out}")
    seen = json.loads(observations.read_text())
    assert [s["transport"] for s in seen] == ["stdio", "http"]
    for found in seen:
        assert found["reached"] and found["observed"]
        assert set(found["env_reads"]) == set(SEED_KNOBS)  # every name from_env looks up
    assert seen[0]["spawned"] and "mempalace_status" in seen[0]["tools"]
    text = observations.read_text()
    assert "profile-init-observation-token" not in text  # names only, never values


def test_usage_problems_are_one_line(capsys: pytest.CaptureFixture[str],
                                     tmp_path: Path) -> None:
    taken = tmp_path / "taken.json"
    taken.write_text("{}")
    cases = [
        (("--bridge", "pi-extension:/no/such/bridge.ts"), "no such file /no/such/bridge.ts"),
        (("--bridge", "no-such-host-program"), "bridge command 'no-such-host-program' not found"),
        (("--bridge", "reference", "--out", str(taken)), "the file exists"),
        (("--bridge", "reference", "--out", str(tmp_path / "nope" / "x.json")),
         "does not exist (create it first)"),
        (("--bridge", shlex.join(scripted("crash:hello"))), "the host did not start"),
    ]
    for args, expected in cases:
        code, out, err = cli(capsys, *args)
        lines = err.strip().splitlines()
        assert code == 2 and len(lines) == 1 and expected in lines[0], (args, err)
        assert out == "" and "Traceback" not in err
    assert taken.read_text() == "{}"


def test_static_tools_are_drafted_only_when_no_session_listed_them() -> None:
    tools = {"palace_status": SCHEMAS["mempalace_status"]}
    listing = derive("pi-extension:/x/s.ts", [session("stdio", reached=True, tools=tools)],
                     CATALOGUE)
    assert "static" not in listing.profile.get("tools", {})
    never = derive("pi-extension:/x/s.ts", [
        session("stdio", reached=True, tools=tools, listed=False, envelope="/data")],
        CATALOGUE)
    valid(never.profile)
    assert never.profile["tools"]["static"] is True
    assert never.profile["results"] == {"path": "/data"}
