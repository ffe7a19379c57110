"""``run --update-golden``: only the reference at the seed level against the fake, one line
otherwise; a run at seed carries the ``/golden`` check, a core run does not."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from palace_conformance.cli import main
from palace_conformance.runner.compare import golden


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as done:
        main(["run", *args])
    out, err = capsys.readouterr()
    return int(done.value.code or 0), out, err


@pytest.mark.parametrize(("args", "fix"), [
    (("--level", "core"), "--level seed"),
    (("--bridge", f"{sys.executable} -c pass"), "--bridge reference"),
    (("--server", "real", "--real-python", sys.executable), "--server fake"),
])
def test_update_golden_refuses_any_other_run_in_one_line(
        capsys: pytest.CaptureFixture[str], args: tuple[str, ...], fix: str) -> None:
    code, _out, err = cli(capsys, "--update-golden", "--select", "life.*", *args)
    assert code == 2
    assert err.count("\n") == 1 and "Traceback" not in err
    assert f"run it with {fix}" in err


@pytest.mark.parametrize(("level", "judged"), [("seed", True), ("core", False)])
def test_the_golden_check_counts_at_seed_only(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, level: str, judged: bool) -> None:
    code, out, err = cli(capsys, "--select", "tool.args.unvalidated-passthrough",
                         "--transport", "stdio", "--level", level, "--json",
                         str(tmp_path / "r.json"))
    assert code == 0, out + err
    [result] = json.loads((tmp_path / "r.json").read_text())["results"]
    checks = [c for c in result["checks"] if c["pointer"] == golden.POINTER]
    assert len(checks) == (1 if judged else 0)
    if judged:
        assert checks[0]["status"] == "pass" and checks[0]["level"] == "seed"
        assert "matches the golden trace" in checks[0]["message"]


def test_a_bridge_lacking_a_seed_capability_is_not_held_to_the_golden_traces() -> None:
    """The traces are a whole seed copy's: a bridge without the diary command registers less
    in every scenario, so only its checks judge it; a whole copy still gets the check."""
    from palace_conformance.contract import CAPABILITIES
    from palace_conformance.runner.results import ScenarioResult

    def judged(capabilities: tuple[str, ...]) -> int:
        result = ScenarioResult(scenario="tool.args.unvalidated-passthrough", transport="stdio",
                                status="passed", level="seed",
                                path=str(Path("fixtures/scenarios/tool/x.json").resolve()),
                                outcome={})
        golden.judge([result], capabilities)
        return sum(c.pointer == golden.POINTER for c in result.checks)

    lacking = tuple(c for c in CAPABILITIES if c != "diary_command")
    assert judged(lacking) == 0
    assert judged(tuple(CAPABILITIES)) == 1
    # a harness capability (result_parts: the OpenCode host's tool result is one string) is the
    # host's, not the copy's: a copy whose host lacks it is still a whole seed copy and judged
    from palace_conformance.contract import HARNESS_CAPABILITIES
    assert HARNESS_CAPABILITIES
    assert judged(tuple(c for c in CAPABILITIES if c not in HARNESS_CAPABILITIES)) == 1
    # nor do the local ones (cli, helper_group_kill) make a copy partial: only their own
    # scenarios are set aside (the Node hosts have neither), the rest still judged whole
    from palace_conformance.contract import LOCAL_CAPABILITIES
    assert set(LOCAL_CAPABILITIES) == {"cli", "helper_group_kill"}
    node_host = tuple(c for c in CAPABILITIES
                      if c not in (*HARNESS_CAPABILITIES, *LOCAL_CAPABILITIES))
    assert judged(node_host) == 1
    assert judged(tuple(c for c in node_host if c != "keepalive")) == 0


def test_a_profile_that_only_describes_a_seed_copy_keeps_the_golden_judge(tmp_path: Path) -> None:
    """A seed copy whose host declares placeholder capabilities needs a profile to claim them
    (the OpenCode copy); that honest description must not take the golden traces away. Any
    edge of its own (a renamed knob, say) does: its trace is translated."""
    from palace_conformance.runner.profile import load_profile

    def judges_of(claims: dict[str, object], **more: object) -> int:
        path = tmp_path / "p.json"
        path.write_text(json.dumps({"schema_version": 1, "name": "copy",
                                    "entry": "pi-extension:copy.ts", "claims": claims, **more}))
        return len(golden.judges(level="seed", profile=load_profile(path), server="fake"))

    capabilities = ["stdio", "http", "wakeup", "feeding", "diary_command", "provenance",
                    "mailbox", "session_preamble", "keepalive"]
    assert judges_of({"capabilities": capabilities, "seed_copy": True}) == 1
    assert judges_of({"capabilities": capabilities, "seed_copy": False}) == 0
    assert judges_of({"capabilities": capabilities, "seed_copy": True}, knobs={
        "MEMPALACE_MCP_TIMEOUT_MS": {"env": "MY_TIMEOUT_MS"}}) == 0
    assert golden.judges(level="seed", profile=None, server="fake")
    assert not golden.judges(level="core", profile=None, server="fake")
