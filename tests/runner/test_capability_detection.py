"""Capabilities nobody stated are detected: a host's placeholder list (hello
``capabilities_source: "default"``) is replaced, once per run, by what observing the bridge showed;
a host's own list, ``--capabilities`` and a profile's claims are believed as they are."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from palace_conformance.contract import CAPABILITIES, TRANSPORTS
from palace_conformance.runner.execution import suite
from palace_conformance.runner.execution.execute import not_applicable_reason
from palace_conformance.runner.execution.suite import SuiteOptions, run_suite
from palace_conformance.runner.profile import Profile
from palace_conformance.runner.profiling import detect as detection
from palace_conformance.runner.profiling.detect import detect, judged, needs_detection
from palace_conformance.runner.profiling.observe import Session
from palace_conformance.runner.results import (
    FROM_DEFAULT,
    FROM_HOST,
    FROM_OBSERVATION,
    FROM_PROFILE,
    HostInfo,
)

from .support import options, scripted, shipped

ALL = ",".join(CAPABILITIES)
WAKE = "wake.fresh-session.inject-once"  # requires wakeup, on stdio and http
HELLO = {"protocol": 1, "impl": "h", "bridge": "b", "runtime": "r", "capabilities": ["stdio"]}


def profile(capabilities: tuple[str, ...] | None) -> Profile:
    return Profile(name="p", entry="reference", source=Path("p.json"), capabilities=capabilities)


# -- the decision: authoritative or a placeholder ---------------------------------------------

def test_hello_marks_a_placeholder_list_only_when_it_says_default() -> None:
    assert HostInfo.from_hello([], HELLO).capabilities_source == FROM_HOST
    assert HostInfo.from_hello([], {**HELLO, "capabilities_source": "default"}
                               ).capabilities_source == FROM_DEFAULT
    # any other value (a typo, a future word) is no placeholder: the host is believed
    assert HostInfo.from_hello([], {**HELLO, "capabilities_source": "declared"}
                               ).capabilities_source == FROM_HOST


def test_only_a_placeholder_without_claims_is_detected() -> None:
    placeholder = HostInfo(capabilities=tuple(CAPABILITIES), capabilities_source=FROM_DEFAULT)
    declared = HostInfo(capabilities=tuple(CAPABILITIES), capabilities_source=FROM_HOST)
    assert needs_detection(placeholder, None)
    assert needs_detection(placeholder, profile(None))  # a profile that claims nothing
    assert not needs_detection(placeholder, profile(("stdio",)))
    assert not needs_detection(placeholder, profile(()))  # claiming nothing at all is a claim
    assert not needs_detection(declared, None)


def test_the_host_info_keeps_where_its_capabilities_came_from() -> None:
    host = HostInfo(capabilities=("stdio",), capabilities_source=FROM_OBSERVATION,
                    capabilities_note="capabilities detected by observation: stdio")
    again = HostInfo.from_json(host.to_json())
    assert again == host
    assert HostInfo.from_json({"capabilities": ["stdio"]}).capabilities_source == FROM_HOST


def test_a_detected_set_names_observation_in_the_reason() -> None:
    scenario = shipped(WAKE)
    assert not_applicable_reason(scenario, "stdio", ["stdio"]) == \
        "the host does not declare wakeup"
    assert not_applicable_reason(scenario, "stdio", ["stdio"], detected=True) == \
        "wakeup not detected by observation, and no profile claims it"
    assert not_applicable_reason(scenario, "http", ["stdio"], detected=True) == \
        "http, wakeup not detected by observation, and no profile claims them"
    assert not_applicable_reason(scenario, "stdio", ["stdio", "wakeup"], detected=True) is None


# -- what the observation gives ---------------------------------------------------------------

def test_what_the_sessions_showed_is_what_is_judged() -> None:
    sessions = [Session("stdio", reached=True, events=["before_agent_start"]),
                Session("http", reached=False)]
    found = judged(sessions, ["stdio", "http"], 2.34)
    assert found.capabilities == ("stdio", "wakeup")
    assert found.note == ("capabilities detected by observation: stdio, wakeup; write a profile "
                          "(palace-conformance profile init) to claim more; it registered no "
                          "palace tool (observed in 2.3 s)")


def test_a_bridge_that_never_loads_is_judged_on_the_transports_alone() -> None:
    sessions = [Session("stdio", status="not_testable",
                        reason="Not testable: host failed to load the bridge: boom\nmore"),
                Session("http", status="not_testable", reason="Not testable: same")]
    found = judged(sessions, ["stdio", "http"], 1.0)
    assert found.capabilities == ("stdio", "http")
    assert "\n" not in found.note
    assert found.note.startswith("capabilities: observation failed (stdio: Not testable: host "
                                 "failed to load the bridge: boom; http: Not testable: same); "
                                 "judged with what the run can reach: stdio, http")
    same = [Session(t, status="not_testable", reason="Not testable: boom") for t in TRANSPORTS]
    assert "observation failed (stdio, http: Not testable: boom); " in judged(
        same, TRANSPORTS, 1.0).note


def test_a_bridge_that_reached_nothing_keeps_the_transports_and_its_features() -> None:
    sessions = [Session("stdio", commands=["mempalace-diary"]), Session("http")]
    found = judged(sessions, ["stdio", "http"], 1.0)
    assert found.capabilities == ("stdio", "http", "diary_command")
    assert "detected by observation: diary_command; the bridge reached the fake on no " \
        "transport, so stdio, http kept" in found.note


def test_detect_watches_only_the_run_s_transports_with_the_run_s_options() -> None:
    calls: list[dict[str, Any]] = []

    def watch(argv: tuple[str, ...], catalogue: list[Any], **kwargs: Any) -> list[Session]:
        calls.append({"argv": argv, "tools": len(catalogue), **kwargs})
        return [Session("stdio", reached=True)]

    ticks = iter([10.0, 13.5])
    run_options = options(("host",), op_timeout_ms=1234)
    host = HostInfo(capabilities=tuple(CAPABILITIES), capabilities_source=FROM_DEFAULT)
    found = detect(host, run_options, ("stdio",), watch=watch, clock=lambda: next(ticks))
    assert found.capabilities == ("stdio",) and found.seconds == 3.5
    [call] = calls
    assert call["argv"] == ("host",) and call["transports"] == ["stdio"]
    assert call["op_timeout_ms"] == 1234 and call["base"] is run_options and call["tools"] == 47
    assert call["follow_stand_in"] is False  # a second session would not change the capabilities


# -- a run ------------------------------------------------------------------------------------

@pytest.fixture
def observations(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the observations a run makes (one per run, whatever its size)."""
    made: list[int] = []
    real = detection.detect

    def counted(*args: Any, **kwargs: Any) -> detection.Detection:
        made.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(suite, "detect", counted)
    return made


def test_a_placeholder_host_is_observed_once_and_judged_with_what_it_showed(
        tmp_path: Path, observations: list[int]) -> None:
    scenarios = [shipped(WAKE), shipped("diary.command.prompt-names-agent-and-topic")]
    run = run_suite(scenarios, SuiteOptions(run=options(scripted("good", f"default:{ALL}"),
                                                        work_root=tmp_path)))
    assert observations == [1]
    # the scripted host loads nothing and reaches no fake: the transports are kept, no feature
    assert run.host.capabilities == ("stdio", "http", "result_parts")  # + the harness's
    assert run.host.capabilities_source == FROM_OBSERVATION
    assert "reached the fake on no transport" in run.host.capabilities_note
    reasons = {(r.scenario, r.transport): r.reason for r in run.results}
    assert reasons[(WAKE, "stdio")] == ("Not applicable: wakeup not detected by observation, "
                                        "and no profile claims it")
    assert [r.status for r in run.results] == ["not_applicable"] * len(run.results)
    assert run.to_json()["host"]["capabilities_source"] == FROM_OBSERVATION


def test_a_bridge_that_never_loads_says_so_and_runs_on_its_transports(
        tmp_path: Path, observations: list[int]) -> None:
    run = run_suite([shipped(WAKE), shipped("life.transport.default-stdio-child")],
                    SuiteOptions(run=options(scripted("fail-load", f"default:{ALL}"),
                                             work_root=tmp_path), transports=("stdio",)))
    assert observations == [1]
    assert run.host.capabilities == ("stdio", "result_parts")  # + the harness's
    assert run.host.capabilities_note.startswith("capabilities: observation failed (stdio: ")
    status = {r.scenario: r.status for r in run.results}
    assert status == {WAKE: "not_applicable",
                      "life.transport.default-stdio-child": "not_testable"}


def test_declared_lists_and_profile_claims_are_not_observed(
        tmp_path: Path, observations: list[int]) -> None:
    declared = run_suite([shipped(WAKE)], SuiteOptions(
        run=options(scripted("good", "stdio,wakeup"), work_root=tmp_path),
        transports=("stdio",)))
    assert declared.host.capabilities_source == FROM_HOST
    assert declared.host.capabilities_note == ""
    assert declared.results[0].status == "failed"  # it ran: the host said it can wake up
    claimed = run_suite([shipped(WAKE)], SuiteOptions(
        run=options(scripted("good", f"default:{ALL}"), work_root=tmp_path,
                    profile=profile(("stdio",))), transports=("stdio",)))
    assert claimed.host.capabilities_source == FROM_PROFILE
    assert claimed.results[0].reason == "Not applicable: the host does not declare wakeup"
    assert observations == []


# -- the bridge's observed shape, applied as a profile would say it ---------------------------

def _catalogue_schema(name: str) -> Any:
    from palace_conformance.resources import tool_catalogue

    return next(t["inputSchema"] for t in tool_catalogue()["tools"] if t["name"] == name)


def test_observed_channels_and_extras_are_applied_and_said_once() -> None:
    """A wake-up in the system prompt and notify diagnostics become the run's channels; tools
    of its own beside catalogue names are set aside, not failed."""
    session = Session("stdio", reached=True, system_prompt=True, notify=2,
                      tools={"mempalace_status": {}, "mempalace_search": {},
                             "palace_where": {"type": "object"}})
    edges, said = detection.observed_edges([session])
    assert edges is not None and edges.capabilities is None and edges.tool_map == {}
    assert (edges.wakeup_channel, edges.diagnostics_channel) == ("system_prompt", "notify")
    assert edges.extra_tools_allowed
    assert said == ["its own tools `palace_where` set aside (beyond the catalogue)",
                    "its wake-up read from the system prompt",
                    "its notify warnings and errors read as its diagnostics"]
    found = judged([session], ["stdio"], 1.0)
    assert found.edges == edges and "its wake-up read from the system prompt" in found.note
    # a bridge shaped like the seed: nothing to apply, nothing said
    plain = Session("stdio", reached=True, injected=True, stderr=1,
                    tools={"mempalace_status": {}})
    assert detection.observed_edges([plain]) == (None, [])


def test_own_tool_names_are_mapped_and_the_next_step_said_once() -> None:
    """A bridge with only its own names is judged through the matched map, and the note says
    how to confirm it, instead of every scenario failing for 47 missing tools."""
    session = Session("http", reached=True, tools={
        "palace_search": _catalogue_schema("mempalace_search"),
        "palace_status": {"type": "object", "properties": {}}})
    edges, said = detection.observed_edges([session])
    assert edges is not None
    assert dict(edges.tool_map) == {"palace_search": "mempalace_search",
                                    "palace_status": "mempalace_status"}
    assert said == ["your bridge registers `palace_search` for `mempalace_search`, "
                    "`palace_status` for `mempalace_status`: judged through that map of its own "
                    "tool names (map them in a profile: palace-conformance profile init writes it)"]


def test_a_bridge_with_no_palace_tool_is_quoted() -> None:
    session = Session("stdio", reached=True, tools={"weather": {"type": "object"}},
                      said="notify error: Incompatible MemPalace 3.11.0 (need 4.x)")
    edges, said = detection.observed_edges([session])
    assert said[0] == ("it registered no palace tool; it said: notify error: Incompatible "
                       "MemPalace 3.11.0 (need 4.x)")
    assert edges is not None and edges.extra_tools_allowed  # "weather" is no palace tool


# -- a session that failed on a busy machine --------------------------------------------------

def test_a_transport_whose_session_failed_is_judged_not_set_aside() -> None:
    # stdio's session ran out of time loading the bridge; http's showed a wake-up: stdio is
    # not a transport the bridge was seen to lack, so its scenarios are judged
    sessions = [Session("stdio", status="not_testable",
                        reason="Not testable: load did not finish within 15000 ms"),
                Session("http", reached=True, events=["before_agent_start"])]
    found = judged(sessions, ["stdio", "http"], 1.0)
    assert found.capabilities == ("stdio", "http", "wakeup")
    assert ("observation failed on stdio (Not testable: load did not finish within 15000 ms), "
            "so stdio kept") in found.note
    # a session that finished and never reached the fake still sets its transport aside
    seen = judged([Session("stdio", reached=True), Session("http", reached=False)],
                  ["stdio", "http"], 1.0)
    assert seen.capabilities == ("stdio",) and "kept" not in seen.note


def test_a_failed_session_is_watched_once_more_with_twice_the_deadline() -> None:
    calls: list[dict[str, Any]] = []

    def watch(argv: tuple[str, ...], catalogue: list[Any], **kwargs: Any) -> list[Session]:
        calls.append(kwargs)
        if len(calls) == 1:
            return [Session("stdio", status="not_testable", reason="Not testable: slow load"),
                    Session("http", reached=False)]
        return [Session("stdio", reached=True, events=["before_agent_start"])]

    host = HostInfo(capabilities=tuple(CAPABILITIES), capabilities_source=FROM_DEFAULT)
    found = detect(host, options(("host",), op_timeout_ms=1000), ("stdio", "http"),
                   watch=watch, clock=lambda: 0.0)
    assert [c["transports"] for c in calls] == [["stdio", "http"], ["stdio"]]
    assert [c["op_timeout_ms"] for c in calls] == [1000, 2000]
    assert found.capabilities == ("stdio", "wakeup") and "observation failed" not in found.note


def test_sessions_that_all_finished_are_watched_once() -> None:
    calls: list[int] = []

    def watch(argv: tuple[str, ...], catalogue: list[Any], **kwargs: Any) -> list[Session]:
        calls.append(1)
        return [Session("stdio", reached=True)]

    host = HostInfo(capabilities=tuple(CAPABILITIES), capabilities_source=FROM_DEFAULT)
    detect(host, options(("host",)), ("stdio",), watch=watch, clock=lambda: 0.0)
    assert calls == [1]
