"""The comparison catches a difference, explains only what a declared rule masks, and reports
each difference as its id plus a compact diff."""

from __future__ import annotations

import copy
from typing import Any

from palace_conformance.fidelity.compare import compare_records, json_diff
from palace_conformance.fidelity.normalise import load_rules


def _record(target: str, root: str, pid: int, entry_stamp: str) -> dict[str, Any]:
    palace = f"{root}/lock/palace"
    holder = f"palace {palace} is held by PID {pid} ({root}/bin/mempalace-mcp); wait"
    return {"target": target,
            "worlds": {"lock": {"<PALACE>": palace, "<BIN>": f"{root}/bin",
                                "<WORLD>": f"{root}/lock"}},
            "points": {
                "lock.cli-mine-refused": {"section": "lock", "session": "lock", "exit": 1,
                                          "stderr": [f"mempalace: {holder}"]},
                "handshake.ping": {"section": "handshake", "session": "lock",
                                   "replies": [{"jsonrpc": "2.0", "id": 8, "result": {}}]},
                "tools.diary_write.fresh": {"section": "tools", "session": "lock", "replies": [
                    {"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "json": {
                        "success": True, "timestamp": f"2026-12-02T{entry_stamp}",
                        "entry_id": "diary_wing_probe_20261202_003553957440_59668c7a9825"},
                        "pretty_printed": True}]}}]},
            }}


def _pair() -> tuple[dict[str, Any], dict[str, Any]]:
    return (_record("real", "/tmp/a", 101, "00:35:53.957440"),
            _record("fake", "/tmp/bb", 202, "00:35:47.673205"))


def test_equal_and_masked_points_agree_and_name_their_rules() -> None:
    real, fake = _pair()
    result = compare_records(real, fake, load_rules())
    status = {v.id: v.status for v in result.verdicts}
    assert status == {"lock.cli-mine-refused": "explained", "handshake.ping": "same",
                      "tools.diary_write.fresh": "explained"}
    rules = {v.id: v.rules for v in result.verdicts}
    assert rules["lock.cli-mine-refused"] == ["pids", "world-paths"]
    assert rules["tools.diary_write.fresh"] == ["diary-entry-ids", "timestamps"]
    assert not result.differences
    assert list(result.lines())[-1] == "3 points compared, 2 explained by rules, 0 differences"


def test_a_doctored_observation_is_a_difference_with_its_id_and_path() -> None:
    real, fake = _pair()
    doctored = copy.deepcopy(fake)
    reply = doctored["points"]["handshake.ping"]["replies"][0]
    reply["result"] = {"pong": True}
    doctored["points"]["lock.cli-mine-refused"]["exit"] = 2
    result = compare_records(real, doctored, load_rules())
    assert [v.id for v in result.differences] == ["lock.cli-mine-refused", "handshake.ping"]
    lines = list(result.lines())
    assert "DIFF lock.cli-mine-refused [lock]" in lines
    assert "    .exit: real 1 | fake 2" in lines
    assert "    .replies[0].result.pong: real <absent> | fake true" in lines
    assert lines[-1] == "3 points compared, 1 explained by rules, 2 differences"
    assert result.to_json()["totals"]["differences"] == 2


def test_a_rule_masks_a_value_never_the_rest_of_the_answer() -> None:
    real, fake = _pair()
    changed = copy.deepcopy(fake)
    answer = changed["points"]["tools.diary_write.fresh"]["replies"][0]["result"]
    answer["content"][0]["json"]["entry_id"] = "diary_wing_other_20261202_003553957440_5966"
    result = compare_records(real, changed, load_rules())
    (difference,) = result.differences
    assert difference.id == "tools.diary_write.fresh"
    assert difference.diff[0][0].endswith(".json.entry_id")


def test_a_point_only_one_side_recorded_is_a_difference() -> None:
    real, fake = _pair()
    del fake["points"]["handshake.ping"]
    result = compare_records(real, fake, load_rules())
    assert [v.id for v in result.differences] == ["handshake.ping"]
    assert "    (point): real <recorded> | fake <absent>" in list(result.lines())


def test_only_restricts_what_is_compared() -> None:
    real, fake = _pair()
    fake["points"]["handshake.ping"]["replies"] = []
    result = compare_records(real, fake, load_rules(), only={"lock.cli-mine-refused"})
    assert [v.id for v in result.verdicts] == ["lock.cli-mine-refused"]


def test_json_diff_reports_lengths_types_and_missing_keys() -> None:
    found = list(json_diff({"a": [1, 2], "b": 1, "c": "x"}, {"a": [1], "b": "1", "d": 0}))
    assert found == [(".a.length", 2, 1), (".b", 1, "1"), (".c", "x", "<absent>"),
                     (".d", "<absent>", 0)]
