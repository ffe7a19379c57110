"""``PALACE_FAKE_FAULTS_FOR``: a run whose bridge runs the light server beside the full one
(profile ``servers``) aims its faults at the full server: the light server's fake takes none,
and its messages are no occurrences of theirs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from palace_conformance.fake.brain import Brain
from palace_conformance.fake.faults import FaultPlan, parse_compact
from palace_conformance.fake.journal import Journal, read_journal
from palace_conformance.fake.lease import Lease
from palace_conformance.fake.options import ENV_FAULTS_FOR, FakeOptions, build_brain
from palace_conformance.fake.palace import PalaceStore

LIST = '{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}'


def full_brain(root: Path, journal: Path, faults_for: str | None) -> Brain:
    (root / "palace").mkdir(parents=True, exist_ok=True)
    plan = FaultPlan([parse_compact("delay@tools/list#1,ms=10")])
    return Brain(transport="stdio", plan=plan, journal=Journal(str(journal), "stdio"),
                 store=PalaceStore(None), lease=Lease(str(root / "palace"), str(root / "home")),
                 catalogue="full", faults_for=faults_for)


def light_first(journal: Path, catalogue: str | None) -> None:
    """The light server's child (another process) started and listed its tools first."""
    start = {"t": 1.0, "pid": 999_999, "transport": "stdio", "kind": "process_start",
             "argv": ["/bin/mempalace-light-mcp"]}
    if catalogue is not None:
        start["catalogue"] = catalogue
    listed = {"t": 1.1, "pid": 999_999, "transport": "stdio", "kind": "recv",
              "method": "tools/list", "tool": None, "id": 1}
    journal.write_text(json.dumps(start) + "\n" + json.dumps(listed) + "\n")


def fired(journal: Path) -> list[str]:
    return [r["fault_id"] for r in read_journal(str(journal)) if r.get("kind") == "fault"]


def test_the_light_servers_messages_are_no_occurrences_of_the_full_servers_faults(
        tmp_path: Path) -> None:
    journal = tmp_path / "journal.jsonl"
    light_first(journal, "light")
    full = full_brain(tmp_path, journal, "full")
    full.start_process(["mempalace-mcp"])
    full.receive(LIST)
    assert fired(journal) == ["cli-1-delay"]  # its own first tools/list
    [_, mine] = [r for r in read_journal(str(journal)) if r.get("kind") == "process_start"]
    assert mine["catalogue"] == "full"


def test_without_it_every_process_counts_as_before(tmp_path: Path) -> None:
    journal = tmp_path / "journal.jsonl"
    light_first(journal, None)
    full = full_brain(tmp_path, journal, None)
    full.start_process(["mempalace-mcp"])
    full.receive(LIST)
    assert fired(journal) == []  # the light server's tools/list was occurrence 1
    assert all("catalogue" not in r for r in read_journal(str(journal))
               if r.get("kind") == "process_start")


def test_a_light_fake_takes_none_of_the_full_servers_faults(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    options = FakeOptions(faults=["delay@tools/list#1,ms=10"], journal=str(tmp_path / "j"),
                          palace=str(tmp_path / "palace"), catalogue="light")
    assert build_brain(options, "stdio").faults != []
    monkeypatch.setenv(ENV_FAULTS_FOR, "full")
    assert build_brain(options, "stdio").faults == []
    full = FakeOptions(faults=["delay@tools/list#1,ms=10"], journal=str(tmp_path / "k"),
                       palace=str(tmp_path / "palace"), catalogue="full")
    assert build_brain(full, "stdio").faults != []
