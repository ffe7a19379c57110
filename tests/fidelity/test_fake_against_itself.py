"""The executor end to end without the real server: the quick script run twice against the
fake, compared. Two honest runs differ only in what the rules mask, so this proves both that the
executor records every point and that the rules cover per-run values (PIDs, ports, ids...)."""

from __future__ import annotations

from pathlib import Path

from palace_conformance.fidelity.compare import compare_records
from palace_conformance.fidelity.execute import run_script
from palace_conformance.fidelity.normalise import load_rules
from palace_conformance.fidelity.script import load_script
from palace_conformance.fidelity.targets import fake_target
from palace_conformance.real.embedding import running_stub


def test_two_fake_runs_differ_only_where_the_rules_say(tmp_path: Path) -> None:
    script = load_script().quick()
    with running_stub() as url:
        first = run_script(script, fake_target(tmp_path / "one" / "shims", url),
                           tmp_path / "one")
        second = run_script(script, fake_target(tmp_path / "two-longer" / "shims", url),
                            tmp_path / "two-longer")
    assert set(first["points"]) == set(script.point_ids())
    assert not any("skipped" in seen for seen in first["points"].values())
    result = compare_records(first, second, load_rules())
    assert [v.id for v in result.differences] == [], list(result.lines())
    assert result.count("explained") >= 10
    refused = first["points"]["lock.cli-mine-refused"]
    assert refused["exit"] == 1 and "is held by PID" in refused["stderr"][0]
    assert first["points"]["lock.http-startup-refused"]["exit"] == 2
    assert first["points"]["auth.missing-401"]["status"] == 401
    # a fresh session's fake palace is fresh, as a new real one is (no chroma database yet)
    fresh_read = first["points"]["business.diary-read-fresh"]
    assert "Chroma database missing" in str(fresh_read), fresh_read
