"""``palace-conformance fixtures validate|list|coverage``: output and exit codes.

The commands run in this process (``main`` prints and exits like the installed command); one test
runs the real command in a subprocess, as a user or CI does.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from palace_conformance.cli import main
from palace_conformance.scenarios.behaviours import load_behaviours
from palace_conformance.scenarios.loader import load_catalogue, slow_scenarios_dir

from .shipped import catalogue, scenario

LAUNCH = "from palace_conformance.cli import main; main()"


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """The real command in a subprocess, as a user or CI runs it."""
    return subprocess.run([sys.executable, "-c", LAUNCH, "fixtures", *args], capture_output=True,
                          text=True, timeout=60)


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exited:
        main(["fixtures", *args])
    out, err = capsys.readouterr()
    return int(exited.value.code or 0), out, err


def test_validate_shipped_in_a_subprocess() -> None:
    """The smoke test of ``fixtures``: the installed command, in a process of its own."""
    done = cli("validate")  # the slow tier is validated too
    count = len(catalogue().scenarios) + len(load_catalogue([slow_scenarios_dir()]).scenarios)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout == f"{count} scenario(s) valid\n"


def test_validate_reports_one_line_per_problem_and_exits_1(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    good = scenario("tool.register.schemas-passed-through")
    (tmp_path / "tool").mkdir()
    data = json.loads(good.path.read_text())
    (tmp_path / "tool" / f"{good.id}.json").write_text(json.dumps(data))
    data["covers"] = ["TOOL-88"]
    copy = tmp_path / "tool" / "tool.register.copy.json"
    copy.write_text(json.dumps({**data, "id": "tool.register.copy"}))
    (tmp_path / "tool" / "tool.broken.json").write_text("{\n  \"id\": ,\n}")
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, "validate", str(tmp_path))
    assert code == 1
    lines = out.splitlines()
    assert lines == [
        "tool/tool.broken.json: malformed JSON at line 2, column 9: Expecting value "
        "(fix the JSON syntax)",
        "tool/tool.register.copy.json: /covers/0: unknown behaviour ID 'TOOL-88' "
        "(use an ID from fixtures/behaviours.json)",
    ]
    assert err == "2 problem(s) in 2 of 3 path(s)\n"


def test_validate_single_good_file(capsys: pytest.CaptureFixture[str]) -> None:
    path = catalogue().scenarios[0].path
    code, out, _ = run(capsys, "validate", str(path))
    assert (code, out) == (0, "1 scenario(s) valid\n")


def test_validate_empty_directory_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "validate", str(tmp_path))
    assert code == 1 and out == "" and "no scenario files" in err


def test_list_table_and_filters(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "list")
    scenarios = catalogue().scenarios
    assert code == 0 and len(out.splitlines()) == len(scenarios)
    code, out, _ = run(capsys, "list", "--area", "stdio")
    ids = [line.split()[0] for line in out.splitlines()]
    assert code == 0 and ids and all(i.startswith("stdio.") for i in ids)
    assert ids == sorted(s.id for s in scenarios if s.area == "stdio")
    code, out, _ = run(capsys, "list", "--covers", "HTTP-04")
    assert code == 0 and {line.split()[0] for line in out.splitlines()} == {
        s.id for s in scenarios if "HTTP-04" in s.covers}


def test_list_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "list", "--json", "--covers", "STDIO-05")
    assert code == 0, err
    listed = json.loads(out)
    expected = sorted(s.id for s in catalogue().scenarios if "STDIO-05" in s.covers)
    assert sorted(e["id"] for e in listed) == expected and "stdio.respawn.after-crash" in expected
    entry = next(e for e in listed if e["id"] == "stdio.respawn.after-crash")
    assert entry["covers"] == ["STDIO-05", "STDIO-12"] and entry["area"] == "stdio"
    assert all("STDIO-05" in e["covers"] for e in listed)


@pytest.mark.parametrize(("args", "fragment"), [
    (("--area", "space"), "unknown area 'space'"),
    (("--covers", "LIFE-99"), "unknown behaviour ID 'LIFE-99'"),
    (("--covers", "life-1"), "'life-1' is not a behaviour ID like STDIO-05"),
])
def test_list_usage_errors(capsys: pytest.CaptureFixture[str], args: tuple[str, ...],
                           fragment: str) -> None:
    code, out, err = run(capsys, "list", *args)
    assert code == 2 and out == "" and fragment in err and len(err.splitlines()) == 1


def test_coverage_of_the_shipped_catalogue(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "coverage")
    behaviours = load_behaviours()
    lines = out.splitlines()
    assert len(lines) == len(behaviours) + 1
    assert lines[0].split()[0] == "LIFE-01"
    assert "life.transport.default-stdio-child" in lines[0]
    missing = [line.split()[0] for line in lines[:-1] if line.endswith("MISSING (no scenario)")]
    assert missing == [], f"behaviours without a scenario: {missing}"
    assert code == 0
    assert f"{len(behaviours)} of {len(behaviours)} behaviour(s) covered" in lines[-1]
    assert err == ""  # every cited ID is in the shipped behaviours.json


def test_coverage_passes_when_every_listed_id_has_a_scenario(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    md = tmp_path / "BEHAVIOURS.md"
    md.write_text("# Subset\n\n- STDIO-05 Self-heal.\n- HTTP-04 404 renegotiation.\n")
    code, out, err = run(capsys, "coverage", "--behaviours", str(md))
    assert code == 0, out + err
    first = out.splitlines()[0]
    assert first.split()[0] == "STDIO-05" and "stdio.respawn.after-crash" in first
    assert "2 of 2 behaviour(s) covered" in out.splitlines()[-1]
    # scenarios citing IDs the subset does not list are named, one line per ID
    stdio12 = [line for line in err.splitlines() if ": STDIO-12 is cited by " in line]
    assert len(stdio12) == 1 and "stdio.respawn.after-crash" in stdio12[0]
    assert stdio12[0].startswith("palace-conformance fixtures coverage: ")
    assert stdio12[0].endswith(f" but is not in {md}")


def test_coverage_json_and_a_missing_id(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    listing = tmp_path / "b.json"
    listing.write_text(json.dumps({"behaviours": [{"id": "STDIO-05", "title": "heal"},
                                                  {"id": "ZZZ-01", "title": "new"}]}))
    code, out, _ = run(capsys, "coverage", "--behaviours", str(listing), "--json")
    report = json.loads(out)
    assert code == 1 and report["uncovered"] == ["ZZZ-01"]
    assert "stdio.respawn.after-crash" in report["behaviours"][0]["scenarios"]


def test_coverage_bad_behaviours_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "coverage", "--behaviours", str(tmp_path / "none.json"))
    assert code == 2 and "cannot read behaviours file" in err and len(err.splitlines()) == 1


def test_list_and_coverage_flag_invalid_scenarios(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "x.json").write_text("[]")
    code, out, err = run(capsys, "list", "--scenarios", str(tmp_path))
    assert code == 1 and out == "" and "1 scenario file(s) skipped as invalid" in err
