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
