"""Bridge profiles: loading, one-line validation, knob translation, files kept inside the run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from palace_conformance.resources import fixtures_dir
from palace_conformance.runner.profile import ProfileError, load_profile


def write(tmp_path: Path, data: dict, name: str = "bridge.profile.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def minimal(**extra: object) -> dict:
    return {"schema_version": 1, "name": "mine", "entry": "pi-extension:ext.ts", **extra}


def test_a_minimal_profile_defaults_to_core_and_the_seeds_channels(tmp_path: Path) -> None:
    profile = load_profile(write(tmp_path, minimal()))
    assert profile.level == "core" and not profile.seed_copy and profile.capabilities is None
    assert (profile.wakeup_channel, profile.diagnostics_channel) == ("message", "stderr")
    assert profile.errors_channel is None  # either way, at core
    assert profile.bridge == f"pi-extension:{(tmp_path / 'ext.ts').resolve()}"


def test_a_seed_copy_is_judged_at_seed_level_unless_it_says_otherwise(tmp_path: Path) -> None:
    assert load_profile(write(tmp_path, minimal(claims={"seed_copy": True}))).level == "seed"
    data = minimal(claims={"seed_copy": True, "level": "core"})
    assert load_profile(write(tmp_path, data)).level == "core"


def test_the_errors_channel_is_read(tmp_path: Path) -> None:
    for channel in ("throw", "is_error"):
        data = minimal(channels={"errors": channel})
        assert load_profile(write(tmp_path, data)).errors_channel == channel


def test_toml_reads_like_json(tmp_path: Path) -> None:
    path = tmp_path / "b.toml"
    path.write_text('schema_version = 1\nname = "t"\nentry = "reference"\n'
                    '[knobs.MEMPALACE_MCP_TIMEOUT_MS]\nenv = "T_S"\nunit = "s"\n')
    profile = load_profile(path)
    assert profile.translate_env({"MEMPALACE_MCP_TIMEOUT_MS": "1500"})[0]["T_S"] == "1.5"


@pytest.mark.parametrize(("data", "words"), [
    (minimal(entry=""), "at /entry"),
    (minimal(claims={"capabilities": ["telepathy"]}), "is not allowed here"),
    (minimal(knobs={"MEMPALACE_MCP_TIMEOUT_MS": {"env": "X", "fixed": 3}}), "/knobs"),
    (minimal(files=[{"path": "/etc/passwd", "content": "x"}]), "must start with ${HOME}/"),
    (minimal(files=[{"path": "${HOME}/../escape", "content": "x"}]), "no '..'"),
    (minimal(surprise=1), "unknown field 'surprise'"),
    (minimal(channels={"errors": "toast"}), "/channels/errors"),
])
def test_a_bad_profile_is_one_line_naming_the_place(tmp_path: Path, data: dict,
                                                    words: str) -> None:
    with pytest.raises(ProfileError) as caught:
        load_profile(write(tmp_path, data))
    assert words in str(caught.value) and "\n" not in str(caught.value)


def test_unreadable_or_malformed_files_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match="cannot read profile"):
        load_profile(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ProfileError, match="is not valid JSON"):
        load_profile(tmp_path / "bad.json")


def test_typed_placeholders_give_numbers_booleans_and_the_urls_parts(tmp_path: Path) -> None:
    profile = load_profile(write(tmp_path, minimal(files=[
        {"path": "${HOME}/settings.json", "json": {
            "server": {"scheme": "${FAKE_SCHEME}", "host": "${FAKE_HOST}",
                       "port": "${FAKE_PORT:number}", "path": "${FAKE_PATH}"},
            "timeoutMs": "${ENV:MEMPALACE_MCP_TIMEOUT_MS:number}",
            "initMs": "${ENV:MEMPALACE_MCP_INIT_TIMEOUT_MS:number}",
            "debug": "${ENV:MEMPALACE_EXT_DEBUG:boolean}",
            "list": ["${ENV:UNSET:number}", "${ENV:RATIO:number}", "${ENV:WORD:number}"],
            "text": "port ${FAKE_PORT} as text", "plain": "${FAKE_PORT:string}"}},
    ])))
    env = {"MEMPALACE_MCP_TIMEOUT_MS": "300", "MEMPALACE_EXT_DEBUG": "1", "RATIO": "1.5",
           "WORD": "soon"}
    [(_, data, _)] = profile.files_for(home=tmp_path, cwd=tmp_path, tmp=tmp_path, remote=True,
                                      values={"FAKE_URL": "http://127.0.0.1:8765/mcp"}, env=env)
    assert json.loads(data) == {
        "server": {"scheme": "http", "host": "127.0.0.1", "port": 8765, "path": "/mcp"},
        "timeoutMs": 300, "debug": True, "list": [None, 1.5, "soon"],
        "text": "port 8765 as text", "plain": "8765"}  # initMs unset: left out
    [(_, data, _)] = profile.files_for(home=tmp_path, cwd=tmp_path, tmp=tmp_path, remote=True,
                                      values={"FAKE_URL": "https://palace.example/mcp"},
                                      env={"MEMPALACE_EXT_DEBUG": "off"})
    found = json.loads(data)
    assert found["server"]["port"] == 443 and found["debug"] is False
    assert "timeoutMs" not in found


def test_a_typed_placeholder_inside_a_longer_string_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match=r"FAKE_PORT:number\} is part of the string") as info:
        load_profile(write(tmp_path, minimal(files=[
            {"path": "${HOME}/s.json", "json": {"url": "http://x:${FAKE_PORT:number}/mcp"}}])))
    assert "\n" not in str(info.value)


def test_knobs_are_renamed_converted_or_make_the_scenario_inapplicable(tmp_path: Path) -> None:
    profile = load_profile(write(tmp_path, minimal(knobs={
        "MEMPALACE_MCP_TIMEOUT_MS": {"env": "MY_TIMEOUT_S", "unit": "s"},
        "MEMPALACE_MCP_INIT_TIMEOUT_MS": {"fixed": 8000},
        "MEMPALACE_MCP_MAX_RESPAWNS": {"absent": True},
        "MEMPALACE_FEED_WING": {"env": "MY_WING"},
    })))
    env, why = profile.translate_env({"MEMPALACE_MCP_TIMEOUT_MS": "2000",
                                      "MEMPALACE_FEED_WING": "w"})
    assert why is None and env["MY_TIMEOUT_S"] == "2" and env["MY_WING"] == "w"
    assert profile.translate_env({"MEMPALACE_MCP_INIT_TIMEOUT_MS": "8000"})[1] is None
    why = profile.translate_env({"MEMPALACE_MCP_INIT_TIMEOUT_MS": "500"})[1]
    assert why == ("the scenario tests MEMPALACE_MCP_INIT_TIMEOUT_MS=500 (essential, not pace); "
                   "this bridge's is fixed at 8000")
    assert "no equivalent" in str(profile.translate_env({"MEMPALACE_MCP_MAX_RESPAWNS": "0"})[1])


def test_files_expand_placeholders_and_follow_the_transport(tmp_path: Path) -> None:
    profile = load_profile(write(tmp_path, minimal(files=[
        {"path": "${HOME}/.pi/agent/palace.json", "when": "remote",
         "json": {"url": "${FAKE_URL}", "token": "${FAKE_TOKEN}", "n": 3}},
        {"path": "${CWD}/notes.txt", "content": "wing=${ENV:MEMPALACE_FEED_WING}|tmp=${TMP}"},
    ])))
    home, cwd, tmp = tmp_path / "home", tmp_path / "cwd", tmp_path
    values = {"FAKE_URL": "http://127.0.0.1:9/mcp", "FAKE_TOKEN": "t0k"}
    remote = profile.files_for(home=home, cwd=cwd, tmp=tmp, remote=True, values=values,
                               env={"MEMPALACE_FEED_WING": "w"})
    assert [p for p, _, _ in remote] == [(home / ".pi/agent/palace.json").resolve(),
                                         (cwd / "notes.txt").resolve()]
    assert json.loads(remote[0][1]) == {"url": "http://127.0.0.1:9/mcp", "token": "t0k", "n": 3}
    assert remote[1][1] == f"wing=w|tmp={tmp}".encode()
    assert remote[0][2] == 0o600
    local = profile.files_for(home=home, cwd=cwd, tmp=tmp, remote=False, values={}, env={})
    assert [p.name for p, _, _ in local] == ["notes.txt"]


def test_a_map_onto_no_catalogue_tool_is_refused_in_one_line(tmp_path: Path) -> None:
    path = write(tmp_path, minimal(tools={"map": {"palace_search": "mempalace_serch"}}))
    with pytest.raises(ProfileError) as raised:
        load_profile(path)
    assert str(raised.value) == (
        f"profile {path}: tools.map maps palace_search onto mempalace_serch, which is no "
        "catalogue tool (did you mean mempalace_search?)")


def test_a_capability_no_scenario_judges_is_refused(tmp_path: Path) -> None:
    from palace_conformance.runner import profile as profiles

    catalogue = tmp_path / "scenarios" / "stdio"
    catalogue.mkdir(parents=True)
    (catalogue / "a.json").write_text(json.dumps({"transports": ["stdio"],
                                                  "requires": ["wakeup"]}))
    (catalogue / "b.json").write_text(json.dumps({"transports": ["http"], "subject": "fake"}))
    roots = [tmp_path / "scenarios"]
    assert profiles.scenario_capabilities(roots) == {"stdio", "wakeup"}
    profiles._check_capabilities(tmp_path, ["stdio", "wakeup"], roots)
    with pytest.raises(ProfileError, match=r"claims http, keepalive, which no scenario of the "
                                           r"catalogue judges \(drop the claim\)$"):
        profiles._check_capabilities(tmp_path, ["stdio", "http", "keepalive"], roots)
    # the shipped catalogue judges every capability a profile may claim
    schema = json.loads((fixtures_dir() / "schema" / "bridge-profile.schema.json").read_text())
    claimable = schema["properties"]["claims"]["properties"]["capabilities"]["items"]["enum"]
    assert set(claimable) <= profiles.scenario_capabilities()


def test_a_multiplexing_tool_needs_a_when_for_each_catalogue_tool(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"schema_version": 1, "name": "p", "entry": "reference",
                                "tools": {"map": {"palace_diary": [
                                    {"tool": "mempalace_diary_read"},
                                    {"tool": "mempalace_diary_write", "when": {"a": "w"}}]}}}))
    with pytest.raises(ProfileError, match=r"/tools/map/palace_diary: .*non-empty \"when\""):
        load_profile(path)
    path.write_text(json.dumps({"schema_version": 1, "name": "p", "entry": "reference",
                                "tools": {"map": {"palace_diary": {"tool": "diary"}}}}))
    with pytest.raises(ProfileError, match="/tools/map/palace_diary"):
        load_profile(path)


def test_servers_by_role_are_read(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"schema_version": 1, "name": "p", "entry": "reference",
                                "servers": {"light": "mempalace-light-mcp"},
                                "claims": {"read_retry": True}}))
    loaded = load_profile(path)
    assert loaded.servers == {"light": "mempalace-light-mcp"} and loaded.read_retry
    path.write_text(json.dumps({"schema_version": 1, "name": "p", "entry": "reference",
                                "servers": {"light": "a b"}}))
    with pytest.raises(ProfileError, match="/servers/light"):
        load_profile(path)
