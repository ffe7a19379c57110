"""``palace-conformance diff`` and ``matrix`` as a user runs them: exit codes, files, real runs.

The real runs use the Python reference host and its deliberately broken mutant (no Node needed):
two runs of the same bridge must agree (every volatile value masked), and a bridge that reports
palace errors as plain exceptions must drift exactly where it first does so.

The commands run in this process (``main`` prints and exits like the installed command); one test
per command runs the real command in a subprocess, as a user or CI does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from palace_conformance.cli import main
from palace_conformance.runner.compare.matrix import read_html_cells

from .support import eager_steps, failing, result, run, save, wakeup

LAUNCH = "from palace_conformance.cli import main; main()"
MUTANT = (sys.executable, str(Path(__file__).resolve().parents[1] / "runner" / "mutant_host.py"))
WAKE = "wake.fresh-session.inject-once"


@dataclass(frozen=True)
class Done:
    """What a finished command left: its exit status and its two streams."""

    returncode: int
    stdout: str
    stderr: str


def bridge_free_environment() -> dict[str, str]:
    """The environment without bridge or fake settings, so the user's never leak into a run."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("MEMPALACE_", "PALACE_"))}


def subprocess_cli(*args: str, cwd: Path | None = None) -> Done:
    """The real command in a subprocess."""
    done = subprocess.run([sys.executable, "-c", LAUNCH, *args], capture_output=True, text=True,
                          timeout=110, check=False, cwd=cwd, env=bridge_free_environment())
    return Done(done.returncode, done.stdout, done.stderr)


Cli = Callable[..., Done]


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Cli:
    """The command in this process, in the same environment ``subprocess_cli`` gives it."""
    for name in set(os.environ) - set(bridge_free_environment()):
        monkeypatch.delenv(name)

    def command(*args: str, cwd: Path | None = None) -> Done:
        capsys.readouterr()
        with monkeypatch.context() as moved:
            if cwd is not None:
                moved.chdir(cwd)
            with pytest.raises(SystemExit) as exited:
                main(list(args))
        out, err = capsys.readouterr()
        code = exited.value.code
        return Done(code if isinstance(code, int) else 0 if code is None else 1, out, err)

    return command


def one_line_error(done: Done, *needles: str) -> None:
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    for needle in needles:
        assert needle in done.stderr


@pytest.mark.parametrize(("args", "needles"), [
    (("diff", "--bridge", "reference"), ("two bridges or more, got 1",)),
    (("diff", "--from", "/no/such.json", "--bridge", "reference"),
     ("--from /no/such.json: no such file",)),
    (("matrix", "--bridge", "reference"), ("nothing to write",)),
    (("matrix", "--html", "x.html"), ("no bridge given",)),
    (("matrix", "--from", "a.json", "--html", "/no/dir/m.html"), ("/no/dir does not exist",)),
    (("diff", "--bridge", "reference", "--bridge", "no-such-host-cmd"),
     ("'no-such-host-cmd' not found",)),
    (("diff", "--bridge", "reference", "--bridge", "reference", "--select", "nope.*"),
     ("no scenario id matches --select nope.*",)),
])
def test_usage_problems_are_one_line_exit_2(cli: Cli, args: tuple[str, ...],
                                            needles: tuple[str, ...], tmp_path: Path) -> None:
    one_line_error(cli(*args, cwd=tmp_path), *needles)


def test_a_file_that_is_not_a_result_is_one_line(cli: Cli, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{\"not\": \"a result\"}")
    one_line_error(cli("diff", "--from", str(bad), "--from", str(bad)),
                   "not a 'palace-conformance run --json' result")
    bad.write_text("nope")
    one_line_error(cli("matrix", "--from", str(bad), "--markdown", str(tmp_path / "m.md")),
                   "not a JSON report")


def test_diff_from_saved_results(cli: Cli, tmp_path: Path) -> None:
    """Also the smoke test of ``diff``: its first run is the installed command, in a process of
    its own."""
    same_a = save(tmp_path / "a.json", run(result(WAKE, "stdio", eager_steps())))
    same_b = save(tmp_path / "b.json",
                  run(result(WAKE, "stdio", eager_steps("/tmp/pc-run-z", pid=7),
                             tmp="/tmp/pc-run-z")))
    agree = subprocess_cli("diff", "--from", f"one={same_a}", "--from", f"two={same_b}")
    assert agree.returncode == 0, agree.stdout + agree.stderr
    assert agree.stdout.splitlines()[-1].startswith("SAME: 0 drifting, 1 agreeing")

    drifting = save(tmp_path / "c.json", run(result(
        WAKE, "stdio", eager_steps(second_prompt=wakeup("again")), status="failed",
        checks=[failing(WAKE, "stdio", "/steps/4/expect/effects/0", "should not be there")])))
    out_json, out_md = tmp_path / "drift.json", tmp_path / "drift.md"
    done = cli("diff", "--from", f"ref={same_a}", "--from", f"mirror={drifting}",
               "--json", str(out_json), "--markdown", str(out_md))
    assert done.returncode == 1, done.stderr
    assert f"DRIFT {WAKE}[stdio]  ref: passed  mirror: failed" in done.stdout
    assert 'step #4 event before_agent_start "second-prompt", at /result/messages/0' in done.stdout
    data = json.loads(out_json.read_text())
    assert [d["id"] for d in data["drift"]] == [f"{WAKE}[stdio]"]
    assert [b["label"] for b in data["bridges"]] == ["ref", "mirror"]
    assert f"## `{WAKE}[stdio]`" in out_md.read_text()
    # the selection applies to saved results too
    none = cli("diff", "--from", str(same_a), "--from", str(drifting), "--select", "tool.*")
    one_line_error(none, "no result matches the selection")


def test_diff_include_ui_compares_what_is_otherwise_named_and_left_out(cli: Cli,
                                                                     tmp_path: Path) -> None:
    toasting = eager_steps()
    toasting[1].effects = [{"kind": "notify", "level": "info", "message": "MemPalace ready"}]
    quiet = save(tmp_path / "quiet.json", run(result(WAKE, "stdio", eager_steps())))
    loud = save(tmp_path / "loud.json", run(result(WAKE, "stdio", toasting)))
    default = cli("diff", "--from", f"ref={quiet}", "--from", f"pi={loud}")
    assert default.returncode == 0, default.stdout + default.stderr
    assert ("not compared: UI-only effects: notify (0 from ref, 1 from pi; --include-ui "
            "compares them)") in default.stdout
    shown = cli("diff", "--from", f"ref={quiet}", "--from", f"pi={loud}", "--include-ui",
                "--all", "--json", str(tmp_path / "ui.json"))
    assert shown.returncode == 1, shown.stdout + shown.stderr
    [drift] = json.loads((tmp_path / "ui.json").read_text())["drift"]
    assert drift["category"] == "ui" and drift["right"]["message"] == "MemPalace ready"
    assert "UI only  (start-up)" in shown.stdout


def test_matrix_from_saved_results_writes_markdown_html_and_counts(tmp_path: Path) -> None:
    """The smoke test of ``matrix``: the installed command, in a process of its own."""
    a = save(tmp_path / "a.json", run(result(WAKE, "stdio", eager_steps())))
    b = save(tmp_path / "b.json", run(result(
        WAKE, "stdio", eager_steps(), status="failed",
        checks=[failing(WAKE, "stdio", "/steps/4/expect/effects/0", "should not be there")])))
    md, page = tmp_path / "m.md", tmp_path / "m.html"
    done = subprocess_cli("matrix", "--from", f"ref={a}", "--from", f"other={b}", "--markdown",
                          str(md), "--html", str(page))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[:2] == ["ref: 1 scenario, 1 result: 1 passed",
                                             "other: 1 scenario, 1 result: 1 failed"]
    assert f"| `{WAKE}` | WAKE-01 | pass | **FAIL** |" in md.read_text()
    cells = {(c["data-bridge"], c["data-transport"]): c["data-status"]
             for c in read_html_cells(page.read_text()) if c["tag"] == "td"
             and "data-scenario" in c}
    assert cells == {("ref", "stdio"): "passed", ("other", "stdio"): "failed"}


#: a fixed part of the catalogue that carries each kind of per-run value, for the default suite
#: (tox -e conformance diffs the reference against itself over the whole catalogue)
SELF_DIFF_SUBSET = (
    "tool.errors.rpc-errors-and-results-kept",
    WAKE,
    "stdio.respawn.after-crash",  # pids of a respawned child
    "mail.owed.ack-of-joins-by-event-id",  # event ids inside the injected wake-up
    "mail.fail-silent.is-error-results",  # a poll that lands before or after a settle
    "life.fail-closed.remote-faults-never-spawn",  # the error kind a kill races between
    "feed.shutdown.prepare-then-mine",  # helper runs with temp paths in their argv
    "http.session.forgotten-between-calls",  # HTTP session ids
)


def test_two_runs_of_the_same_bridge_never_drift(cli: Cli, tmp_path: Path) -> None:
    # pids, ports, temp dirs, session, drawer and event ids, timestamps and durations all
    # differ between these runs; none of it may count
    done = cli("diff", "--bridge", "reference", "--bridge", "reference",
               *(arg for sid in SELF_DIFF_SUBSET for arg in ("--select", sid)),
               "--json", str(tmp_path / "d.json"), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    data = json.loads((tmp_path / "d.json").read_text())
    assert data["drift"] == [] and data["incomparable"] == []
    assert data["not_applicable"] == [] and data["masked"] == []
    ran = {a.rsplit("[", 1)[0] for a in data["agreed"]}
    assert ran == set(SELF_DIFF_SUBSET) and len(data["agreed"]) >= len(SELF_DIFF_SUBSET)
    assert [b["label"] for b in data["bridges"]] == ["reference", "reference#2"]
    assert done.stdout.splitlines()[-1].startswith(f"SAME: 0 drifting, {len(data['agreed'])} "
                                                   "agreeing")


def test_a_mutant_bridge_drifts_where_it_first_misreports(cli: Cli, tmp_path: Path) -> None:
    mutant = " ".join([*MUTANT, "errors-as-exception"])
    done = cli("diff", "--bridge", "reference", "--bridge", mutant, "--transport", "stdio",
               "--select", "tool.errors.codes-and-data-kept", "--json", str(tmp_path / "d.json"),
               cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    [drift] = json.loads((tmp_path / "d.json").read_text())["drift"]
    assert drift["id"] == "tool.errors.codes-and-data-kept[stdio]"
    assert drift["statuses"] == ["passed", "failed"]
    assert drift["step"] == {"key": "internal", "index": 3, "op": "call_tool",
                             "label": "internal"}
    assert (drift["step_pointer"], drift["left"], drift["right"]) == (
        "/error/kind", "tool_error", "exception")
    assert 'step #3 call_tool "internal", at /error/kind' in done.stdout


def test_matrix_applies_a_baseline_to_the_bridge_it_names(cli: Cli, tmp_path: Path) -> None:
    failed = run(result(WAKE, "stdio", eager_steps(), status="failed",
                        checks=[failing(WAKE, "stdio", "/steps/4/expect/effects/0", "no")]),
                 result("tool.register.schemas-passed-through", "stdio", eager_steps(),
                        covers=("TOOL-01",)))
    a = save(tmp_path / "a.json", failed)
    b = save(tmp_path / "b.json", failed)
    baseline = tmp_path / "baseline.json"
    baseline.write_text(json.dumps({"schema_version": 1, "entries": [
        {"scenario": WAKE, "transport": "stdio", "reason": "one-shot not done yet"},
        {"scenario": "tool.register.schemas-passed-through", "transport": "stdio",
         "reason": "fixed since"}]}))
    md = tmp_path / "m.md"
    done = cli("matrix", "--from", f"one={a}", "--from", f"two={b}",
               "--baseline", f"two={baseline}", "--markdown", str(md))
    assert done.returncode == 0, done.stderr
    text = md.read_text()
    assert f"| `{WAKE}` | WAKE-01 | **FAIL** | known failure |" in text
    assert "Expected by the baseline: one-shot not done yet" in text
    assert "Baseline entry of `two` that no longer holds: tool.register.schemas-passed-through" \
        in text
    one_line_error(cli("matrix", "--from", f"one={a}", "--baseline", f"nobody={baseline}",
                       "--markdown", str(md)), "no bridge is labelled 'nobody'")


def test_diff_from_a_saved_run_carries_the_profile_it_was_judged_with(
        cli: Cli, tmp_path: Path) -> None:
    """``run --profile --json`` records the profile (its name, path and the curated tools its
    map offers); ``diff --from`` compares that file as the profile did; a file judged with a
    profile it does not record (an older kit's) is refused in one line."""
    from palace_conformance.runner.compare.sources import Selection, SourceSpec, collect
    from palace_conformance.runner.results import RunResult

    profile = tmp_path / "curated.profile.json"
    profile.write_text(json.dumps({
        "schema_version": 1, "name": "curated", "entry": "reference",
        "tools": {"map": {"palace_status": "mempalace_status",
                          "palace_search": "mempalace_search"}}}))
    out = tmp_path / "curated.json"
    done = cli("run", "--profile", str(profile), "--transport", "stdio", "--select",
               "life.handshake.initialize-first", "-q", "--json", str(out))
    assert done.returncode in (0, 1), done.stderr
    saved = json.loads(out.read_text())["profile"]
    assert saved == {"name": "curated", "path": str(profile.resolve()),
                     "offered": ["mempalace_search", "mempalace_status"]}
    plain = save(tmp_path / "plain.json", run(result(WAKE, "stdio", eager_steps())))
    sources = collect([SourceSpec("file", str(out)), SourceSpec("file", str(plain))],
                      Selection(transports=("stdio",)))
    assert [s.offered for s in sources] == [
        frozenset({"mempalace_search", "mempalace_status"}), None]
    # an older kit's file: /profile notes, no record of the profile
    old = json.loads(out.read_text())
    old.pop("profile")
    old["results"][0]["checks"].append({**old["results"][0]["checks"][0],
                                        "pointer": "/profile", "status": "pass"})
    unrecorded = tmp_path / "unrecorded.json"
    unrecorded.write_text(json.dumps(old))
    assert RunResult.from_json(old).profile is None
    one_line_error(cli("diff", "--from", str(unrecorded), "--from", str(plain)),
                   f"--from {unrecorded}: it was judged with a profile the file does not "
                   "record", "run --profile FILE --json FILE")
