"""Repro bundles and ``replay``: what a bundle holds, that replay reproduces the failure and
passes against the reference bridge, and that no secret ever reaches a bundle."""

from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path

import pytest

from palace_conformance.runner.reports.redact import (
    Redactor,
    environment_secrets,
    restore_markers,
    scenario_secrets,
)
from palace_conformance.scenarios.loader import load_scenario
from palace_conformance.scenarios.palace_state import initial_state

from .support import ERRORS_AS_EXCEPTION, LEAKY, MUTANT_HOST, cli, one_line_error, shipped_file

ERRORS = "tool.errors.rpc-errors-and-results-kept"
BEARER = "http.auth.bearer-on-every-request"
BEARER_TOKEN = "tok-conformance-5b1d2e"
ENV_SECRET = "sk-live-runner-env-0f3a9c71"


@pytest.fixture(scope="module")
def failing_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One failing stdio run (a host that reports every bridge error as 'exception')."""
    report = tmp_path_factory.mktemp("report")
    with pytest.raises(SystemExit) as done:
        from palace_conformance.cli import main

        main(["run", shipped_file(ERRORS), "--bridge", ERRORS_AS_EXCEPTION, "--transport",
              "stdio", "--report-dir", str(report)])
    assert done.value.code == 1
    return report


def test_a_failing_result_gets_a_complete_bundle(failing_report: Path) -> None:
    bundle = failing_report / "bundles" / f"{ERRORS}--stdio"
    names = sorted(p.name for p in bundle.iterdir())
    assert names == ["README.md", "bundle.json", "faults.json", "host-stderr.txt",
                     "journal.jsonl", "palace-state.json", "result.json", "scenario.json",
                     "trace.json"]
    manifest = json.loads((bundle / "bundle.json").read_text())
    assert (manifest["scenario"], manifest["transport"], manifest["transports"],
            manifest["status"], manifest["bridge"], manifest["server"]) == (
        ERRORS, "stdio", ["stdio"], "failed", ERRORS_AS_EXCEPTION, "fake")
    scenario = load_scenario(shipped_file(ERRORS))
    assert json.loads((bundle / "scenario.json").read_text()) == dict(scenario.raw)
    assert json.loads((bundle / "faults.json").read_text()) == \
        scenario.faults.for_transport("stdio").to_json()
    state = json.loads((bundle / "palace-state.json").read_text())
    seeded = initial_state(scenario.palace)  # the replica id is random per palace: one each
    assert re.fullmatch(r"rep_[0-9a-f]{32}", state.pop("replica")) and seeded.pop("replica")
    assert state == seeded
    result = json.loads((bundle / "result.json").read_text())
    assert result["status"] == "failed" and any(
        c["pointer"] == "/steps/3/expect/error/kind" and c["status"] == "fail"
        for c in result["checks"])
    journal = [json.loads(line) for line in (bundle / "journal.jsonl").read_text().splitlines()]
    assert journal[0]["kind"] == "process_start"
    assert any(r.get("method") == "tools/call" for r in journal)
    trace = json.loads((bundle / "trace.json").read_text())
    assert [s["key"] for s in trace["steps"]][:4] == ["0", "1", "2", "unknown-param"]
    assert trace["steps"][3]["error"]["kind"] == "exception"
    assert trace["journal"][0]["pid"] == "<pid-1>" and "t" not in trace["journal"][0]
    assert "/tmp/" not in json.dumps(trace)
    # runs that passed get no bundle
    assert sorted(p.name for p in (failing_report / "bundles").iterdir()) == [f"{ERRORS}--stdio"]


def test_the_readme_has_the_exact_commands(failing_report: Path) -> None:
    bundle = failing_report / "bundles" / f"{ERRORS}--stdio"
    readme = (bundle / "README.md").read_text()
    assert readme.startswith(f"# Repro: `{ERRORS}` on stdio\n")
    assert "- `/steps/3/expect/error/kind` (step `unknown-param`): expected error kind " \
           "'tool_error', got 'exception'" in readme
    assert "palace-conformance fake install-shim \"$TMP/bin\"" in readme
    assert "export PALACE_FAKE_PLAN=\"$PWD/faults.json\"" in readme
    assert 'palace-conformance fake stdio --plan faults.json --state "$TMP/palace-state.json"' \
        in readme
    assert "--bridge reference" in readme
    assert f"--bridge {shlex.quote(ERRORS_AS_EXCEPTION)}  # the bridge recorded here" in readme
    assert "palace-conformance replay " in readme and f"{ERRORS}--stdio" in readme
    assert "4. `call_tool mempalace_diary_read` as 'unknown-param'" in readme
    assert "- **Palace:** the fake server" in readme and "--server" not in readme


def test_a_bundle_of_the_real_palace_says_so_when_replayed_against_the_fake(
        capsys: pytest.CaptureFixture[str], failing_report: Path, tmp_path: Path) -> None:
    """Fake and real fail differently: a replay on the other server must not pass silently
    for a reproduction attempt of the recorded one."""
    import shutil

    from palace_conformance.runner.reports.replay import load_bundle

    real = tmp_path / "real-bundle"
    shutil.copytree(failing_report / "bundles" / f"{ERRORS}--stdio", real)
    manifest = json.loads((real / "bundle.json").read_text())
    assert load_bundle(real).server == "fake"
    manifest["server"] = "real"
    (real / "bundle.json").write_text(json.dumps(manifest))
    assert load_bundle(real).server == "real"
    code, out, _ = cli(capsys, "replay", str(real), "--bridge", ERRORS_AS_EXCEPTION)
    assert code == 1
    assert ("note: the bundle was recorded against the real server; replaying against the "
            "fake server as asked (add --server real to replay it there)") in out
    from palace_conformance.runner.reports import bundle as bundles
    from palace_conformance.runner.results import ScenarioResult

    result = ScenarioResult.from_json(json.loads((real / "result.json").read_text()))
    readme = bundles._readme(load_scenario(shipped_file(ERRORS)), result, "reference", "real",
                             str(real), ("stdio",), bundles.Redactor([]))
    assert "- **Palace:** the real server" in readme
    assert f"replay {shlex.quote(str(real))} --server real --bridge reference" in readme
    del manifest["server"]  # a bundle from before --server was recorded against the fake
    (real / "bundle.json").write_text(json.dumps(manifest))
    assert load_bundle(real).server == "fake"


def test_replay_reproduces_the_failure_and_passes_on_the_reference(
        capsys: pytest.CaptureFixture[str], failing_report: Path, tmp_path: Path) -> None:
    bundle = str(failing_report / "bundles" / f"{ERRORS}--stdio")
    code, out, _ = cli(capsys, "replay", bundle, "--bridge", ERRORS_AS_EXCEPTION, "--json",
                       str(tmp_path / "again.json"))
    assert code == 1
    assert f"replaying {ERRORS} on stdio against {ERRORS_AS_EXCEPTION}" in out
    assert "/steps/3/expect/error/kind step unknown-param: expected error kind 'tool_error', " \
           "got 'exception'" in out
    assert out.rstrip().endswith(f"replay of {ERRORS} [stdio]: recorded failed, now failed "
                                 "(reproduced)")
    again = json.loads((tmp_path / "again.json").read_text())
    assert [(r["transport"], r["status"]) for r in again["results"]] == [("stdio", "failed")]

    code, out, _ = cli(capsys, "replay", bundle, "--bridge", "reference")
    assert code == 0, out
    assert out.rstrip().endswith("recorded failed, now passed (changed)")
    assert f"note: the bundle was recorded with --bridge {shlex.quote(ERRORS_AS_EXCEPTION)}; " \
           "replaying against reference as asked" in out


def test_replay_usage_problems(capsys: pytest.CaptureFixture[str], failing_report: Path,
                               tmp_path: Path) -> None:
    code, _, err = cli(capsys, "replay", str(tmp_path / "nope"))
    assert code == 2 and "no such bundle directory" in one_line_error(err)
    code, _, err = cli(capsys, "replay", str(failing_report))
    assert code == 2 and "not a repro bundle (no bundle.json)" in one_line_error(err)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "bundle.json").write_text('{"transports": "stdio"}')
    code, _, err = cli(capsys, "replay", str(broken))
    assert code == 2 and "malformed manifest" in one_line_error(err)
    (broken / "bundle.json").write_text('{"transports": ["stdio"]}')
    (broken / "scenario.json").write_text('{"id": "life.x.y", "schema_version": 1}')
    code, _, err = cli(capsys, "replay", str(broken))
    assert code == 2 and "scenario.json: " in one_line_error(err)
    bundle = str(failing_report / "bundles" / f"{ERRORS}--stdio")
    code, _, err = cli(capsys, "replay", bundle, "--bridge", "/nonexistent/host")
    assert code == 2 and "bridge command '/nonexistent/host' not found" in one_line_error(err)


def test_bundles_never_hold_a_secret(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A bridge that spills the bearer token and the runner's own secrets everywhere: the run
    fails (wire_secrets), and its bundle still holds neither; replay still works."""
    monkeypatch.setenv("PC_TEST_API_TOKEN", ENV_SECRET)  # inherited by the bridge
    report = tmp_path / "report"
    code, out, _ = cli(capsys, "run", shipped_file(BEARER), "--bridge", LEAKY, "--report-dir",
                       str(report))
    assert code == 1
    assert "/expect/wire_secrets/0" in out  # the leak is caught by the check itself
    bundle = report / "bundles" / f"{BEARER}--http"
    texts = {p.name: p.read_text() for p in bundle.iterdir()}
    assert set(texts) >= {"scenario.json", "host-stderr.txt", "result.json", "trace.json",
                          "journal.jsonl", "README.md", "bundle.json"}
    for name, text in texts.items():
        assert BEARER_TOKEN not in text, name
        assert ENV_SECRET not in text, name
    assert "leaky bridge: debug env" in texts["host-stderr.txt"]
    assert "<redacted-secret-" in texts["host-stderr.txt"]
    assert json.loads(texts["scenario.json"])["http"]["token"] == "<redacted-secret-1>"
    assert json.loads(texts["bundle.json"])["redacted_secrets"] >= 2
    readme = texts["README.md"]
    assert "export FAKE_TOKEN='<redacted-secret-1>'" in readme
    assert 'MEMPALACE_MCP_HTTP_TOKEN="$FAKE_TOKEN" palace-conformance fake http --port 0 ' \
           '--plan faults.json' in readme
    assert 'export MEMPALACE_REMOTE_URL="${FAKE_URL}"' in readme
    assert 'export MEMPALACE_REMOTE_TOKEN="${FAKE_TOKEN}"' in readme  # the scenario's env
    # the bundle is what travels; the report dir's other files are redacted too
    # (test_report_secrets.py)
    code, out, _ = cli(capsys, "replay", str(bundle), "--bridge", "reference")
    assert code == 0, out


def test_a_parity_failure_bundles_both_transports(capsys: pytest.CaptureFixture[str],
                                                  tmp_path: Path) -> None:
    sid = "tool.results.is-error-content-kept"
    bridge = shlex.join([sys.executable, str(MUTANT_HOST), "http-details"])
    report = tmp_path / "report"
    code, _, _ = cli(capsys, "run", shipped_file(sid), "--bridge", bridge, "--report-dir",
                     str(report), "--level", "seed")  # parity is judged at the seed level
    assert code == 1
    bundle = report / "bundles" / f"{sid}--parity"
    assert sorted(p.name for p in (bundle / "http").iterdir()) == [
        "faults.json", "host-stderr.txt", "journal.jsonl", "palace-state.json", "result.json",
        "trace.json"]
    assert (bundle / "stdio" / "trace.json").exists()
    manifest = json.loads((bundle / "bundle.json").read_text())
    assert (manifest["transport"], manifest["transports"]) == ("parity", ["stdio", "http"])
    assert json.loads((bundle / "result.json").read_text())["checks"][0]["pointer"] == "/parity"
    readme = (bundle / "README.md").read_text()
    assert "## Serve the fake on its own (stdio)" in readme
    assert "## Serve the fake on its own (http)" in readme
    code, out, _ = cli(capsys, "replay", str(bundle), "--bridge", bridge)
    assert code == 1 and "recorded failed, now failed (reproduced)" in out
    assert "note: the bundle was recorded" not in out  # the same bridge: nothing to say
    code, out, _ = cli(capsys, "replay", str(bundle), "--bridge", "reference")
    assert code == 0, out


# -- the redaction rules ------------------------------------------------------------------------

def test_scenario_secrets_are_the_token_rotations_wire_secrets_and_secret_env() -> None:
    raw = {"http": {"token": "tok-1"},
           "env": {"MEMPALACE_REMOTE_TOKEN": "tok-wrong", "MEMPALACE_MCP_TIMEOUT_MS": "300",
                   "OTHER": "${FAKE_TOKEN}"},
           "steps": [{"op": "server", "action": "rotate_token", "token": "tok-2"}],
           "expect": {"wire_secrets": ["${FAKE_TOKEN}", "tok-1", "hunter2"]}}
    assert scenario_secrets(raw) == ["tok-1", "tok-wrong", "tok-2", "hunter2"]


def test_environment_secrets_skip_short_and_harmless_values() -> None:
    env = {"GITHUB_TOKEN": "ghp_abcdefgh1234", "API_KEY": "1", "SECRET_COUNT": "12345678",
           "PATH": "/usr/bin:/bin", "DB_PASSWORD": "correct horse"}
    assert environment_secrets(env) == ["correct horse", "ghp_abcdefgh1234"]


def test_markers_are_consistent_and_restore_to_fresh_values() -> None:
    redactor = Redactor(["tok-1", "tok-12345"])
    text = redactor.text('tok-12345 and tok-1 and "tok-1"')
    assert text == '<redacted-secret-2> and <redacted-secret-1> and "<redacted-secret-1>"'
    assert redactor.leaks(text) == []
    restored = restore_markers({"a": "<redacted-secret-1>", "b": ["x <redacted-secret-1>"],
                                "c": "<redacted-secret-2>"})
    first = restored["a"]
    assert first.startswith("replay-secret-1-") and restored["b"] == [f"x {first}"]
    assert restored["c"] != first and "tok-" not in json.dumps(restored)


def test_encoded_forms_of_a_secret_are_replaced_and_short_ones_left_alone() -> None:
    import base64
    from urllib.parse import quote, quote_plus

    secret = "pw/+&=?with space"
    redactor = Redactor([secret, "tok-1"])
    basic = base64.b64encode(f"user:{secret}".encode()).decode()
    text = f"Basic {basic} url={quote(secret, safe='')} form={quote_plus(secret)} tok-1"
    assert redactor.leaks(text) == ["<redacted-secret-1>", "<redacted-secret-2>"]
    clean = redactor.text(text)
    assert redactor.leaks(clean) == []
    assert clean.count("<redacted-secret-1>") == 3 and clean.endswith("<redacted-secret-2>")
    # "tok-1" is too short for its encoded forms to be told from chance: only it is replaced
    assert Redactor(["tok-1"]).text(base64.b64encode(b"tok-1").decode()) == "dG9rLTE="


def test_a_reused_report_dir_holds_only_the_new_run(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """A stale bundle would replay a failure the new run does not have; a person's own files
    in the directory stay."""
    report = tmp_path / "report"
    stale = report / "bundles" / "stdio.old.gone--stdio"
    stale.mkdir(parents=True)
    (stale / "bundle.json").write_text("{}")
    (report / "runs" / "old").mkdir(parents=True)
    (report / "notes.txt").write_text("mine")
    code, _, err = cli(capsys, "run", shipped_file(ERRORS), "--transport", "stdio",
                       "--report-dir", str(report))
    assert code == 0, err
    assert not (report / "bundles").exists()  # a passing run writes no bundle
    assert not (report / "runs" / "old").exists() and (report / "runs").is_dir()
    assert (report / "notes.txt").read_text() == "mine"
    assert json.loads((report / "results.json").read_text())["ok"] is True
