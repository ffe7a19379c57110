"""``fixtures coverage --dimensions``: the behaviour x dimension table is derived from the fixtures.

A scenario added to a directory changes the table (a gap closes), the value classes follow the
knob's kind, pace values and subject-``fake`` scenarios count for nothing, and the one hand tag
(``dimensions.defaults``) is schema- and loader-checked.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from palace_conformance.cli import main
from palace_conformance.scenarios import dimensions
from palace_conformance.scenarios.behaviours import load_behaviours
from palace_conformance.scenarios.loader import Context, load_catalogue, scenarios_dir

CELL_ZERO = "knob.MEMPALACE_MAILBOX_POLL_MS.zero"
ZERO_POLL = "mail/mail.poll.zero-polls-every-settle.json"


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exited:
        main(["fixtures", "coverage", "--dimensions", *args])
    out, err = capsys.readouterr()
    return int(exited.value.code or 0), out, err


def table_of(capsys: pytest.CaptureFixture[str], folder: Path) -> dict[str, Any]:
    code, out, err = run(capsys, "--json", "--scenarios", str(folder))
    assert code == 0, err
    report: dict[str, Any] = json.loads(out)
    return report


def test_adding_a_fixture_changes_the_table(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copy(scenarios_dir() / "mail/mail.gates.no-device-silent.json", tmp_path)
    before = table_of(capsys, tmp_path)
    assert CELL_ZERO in before["gaps"]
    shutil.copy(scenarios_dir() / ZERO_POLL, tmp_path)
    after = table_of(capsys, tmp_path)
    assert CELL_ZERO not in after["gaps"]
    assert len(after["gaps"]) < len(before["gaps"]) and after["covered"] > before["covered"]
    cell = next(c for c in after["cells"] if c["dimension"] == CELL_ZERO)
    assert cell["scenarios"] == ["mail.poll.zero-polls-every-settle"]
    assert "MAIL-05" in cell["behaviours"]
    assert after["by_behaviour"]["MAIL-05"]["zero"] >= 1


def test_shipped_table_markdown(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys)
    assert code == 0 and err == ""
    vocabulary = dimensions.load_vocabulary()
    owed = len(vocabulary.cells())
    last = out.splitlines()[-1]
    assert f"of {owed} dimension cell(s) covered" in last
    # the CLI and a forking helper are expressible and covered; a flag's malformed value is
    # not owed a scenario until the seed defines one (docs/choices.md): a gap on purpose
    assert "subject.cli" not in last and "helper.forking" not in last
    assert "knob.MEMPALACE_FEED.malformed" in last
    assert "| subject.cli: the palace-bridge CLI itself as the subject | http.cli." in out
    assert "| MEMPALACE_MAILBOX_POLL_MS | MAIL-05 |" in out
    assert "pair.feed+mailbox" in out and "mail.pair.one-settle-feeds-and-polls" in out


@pytest.mark.parametrize(("kind", "raw", "expected"), [
    ("integer", None, "unset"), ("integer", "  ", "unset"), ("integer", "0", "zero"),
    ("integer", "1", "edge"), ("integer", " 50 ", "edge"), ("integer", "2147483647", "edge"),
    ("integer", "300", None), ("integer", "-1", "malformed"), ("integer", "1.5", "malformed"),
    ("flag", "off", "zero"), ("flag", "1", None), ("flag", "maybe", "malformed"),
    ("json", '{"tool": "mempalace_status"}', None), ("json", '{"tool": ""}', "malformed"),
])
def test_value_classes(kind: str, raw: str | None, expected: str | None) -> None:
    assert dimensions.knob_class(kind, raw) == expected


def _scenario(tmp_path: Path, **fields: Any) -> Path:
    data: dict[str, Any] = {
        "schema_version": 1, "id": "knob.dims.probe", "title": "probe", "covers": ["KNOB-01"],
        "transports": ["stdio"], "steps": [{"op": "load"}, {"op": "shutdown"}], **fields}
    path = tmp_path / "knob.dims.probe.json"
    path.write_text(json.dumps(data))
    return path


def _cells(path: Path) -> set[str]:
    catalogue = load_catalogue([path], Context.default(load_behaviours()))
    assert not catalogue.problems, catalogue.problems
    return dimensions.scenario_cells(catalogue.scenarios[0], dimensions.load_vocabulary())


def test_pace_values_do_not_count_and_defaults_are_declared(tmp_path: Path) -> None:
    paced = _scenario(tmp_path, env={"MEMPALACE_FEED": "0", "MEMPALACE_MCP_TIMEOUT_MS": "0"},
                      env_pace=["MEMPALACE_FEED"])
    assert _cells(paced) == {"knob.MEMPALACE_MCP_TIMEOUT_MS.zero"}
    declared = _scenario(tmp_path, dimensions={"defaults": ["MEMPALACE_MCP_KEEPALIVE_MS"]})
    assert _cells(declared) == {"knob.MEMPALACE_MCP_KEEPALIVE_MS.unset"}


def test_a_declared_default_the_env_sets_is_a_problem(tmp_path: Path) -> None:
    path = _scenario(tmp_path, env={"MEMPALACE_MCP_KEEPALIVE_MS": "50"},
                     dimensions={"defaults": ["MEMPALACE_MCP_KEEPALIVE_MS"]})
    problems = load_catalogue([path], Context.default(load_behaviours())).problems
    assert len(problems) == 1
    assert "/dimensions/defaults/0" in str(problems[0]) and "is set in env" in str(problems[0])
    unknown = _scenario(tmp_path, dimensions={"defaults": ["MEMPALACE_NO_SUCH_KNOB"]})
    assert load_catalogue([unknown], Context.default(load_behaviours())).problems


def test_every_vocabulary_entry_is_derivable_and_cites_known_behaviours() -> None:
    vocabulary = dimensions.load_vocabulary()
    assert dimensions.unknown_situations(vocabulary) == []
    known = {b.id for b in load_behaviours()}
    assert {b for k in vocabulary.knobs for b in k.behaviours} <= known
