"""A one-line behaviour change in the reference fails at the seed level, on its golden trace.

Each case copies ``palace_bridge`` into a temp dir, changes one line there (the reference itself is
never edited), and runs a shipped scenario through the reference host importing the copy. The
scenario's own checks do not see the change; the golden check does, and names the first
divergence: category, step, field, expected and got. The unchanged copy, run the same way,
matches its golden traces: the copying is not what diverges.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from tests.runner.support import shipped

import palace_bridge
import palace_conformance
from palace_conformance.runner.compare import golden
from palace_conformance.runner.execution.execute import RunOptions, run_scenario
from palace_conformance.runner.results import ScenarioResult

BRIDGE = Path(palace_bridge.__file__).resolve().parent
KIT = Path(palace_conformance.__file__).resolve().parents[1]

#: name -> (file in palace_bridge, the line as it is, the line changed, scenario, transport,
#:          what the first divergence must name: category, step, field prefix, expected, got)
CHANGES = {
    "argv-items-swapped": (
        "features/feeding.py",
        'argv = [self.settings.bin, "--prepare", "--reason", reason, "--wing", self.settings.wing]',
        'argv = [self.settings.bin, "--prepare", reason, "--reason", "--wing", self.settings.wing]',
        "wake.fresh-session.inject-once", "stdio",
        ("processes", "step #5 shutdown", "/effects/0/argv/2", "--reason", "session_shutdown")),
    "protocol-version-header-dropped": (
        "session.py",
        "headers[VERSION_HEADER] = self.protocol_version",
        "pass",
        "wake.fresh-session.inject-once", "http",
        ("wire", "(start-up)", "/requests/", None, None)),
    "description-cut-at-512": (
        "tools.py",
        'description=description if isinstance(description, str) else "",',
        'description=description[:512] if isinstance(description, str) else "",',
        "wake.fresh-session.inject-once", "stdio",
        ("registrations", "(start-up)", "/tools/", None, None)),
}


def _patched_host(tmp_path: Path, change: tuple[str, str, str] | None) -> tuple[str, ...]:
    """The reference host importing a copy of palace_bridge with ``change`` made in it."""
    copy = tmp_path / "copy"
    shutil.copytree(BRIDGE, copy / "palace_bridge",
                    ignore=shutil.ignore_patterns("__pycache__"))
    if change is not None:
        relative, old, new = change
        target = copy / "palace_bridge" / relative
        text = target.read_text(encoding="utf-8")
        assert text.count(old) == 1, f"{relative} no longer holds the line this case changes"
        target.write_text(text.replace(old, new), encoding="utf-8")
    host = tmp_path / "host.py"
    host.write_text(f"import sys\nsys.path[:0] = [{str(copy)!r}, {str(KIT)!r}]\n"
                    "from palace_conformance.hosts import reference\nreference.main()\n",
                    encoding="utf-8")
    return (sys.executable, str(host))


def _judged(tmp_path: Path, change: tuple[str, str, str] | None, scenario: str,
            transport: str) -> ScenarioResult:
    options = RunOptions(host_argv=_patched_host(tmp_path, change), work_root=tmp_path,
                         warm_start=False)
    result = run_scenario(shipped(scenario), transport, options)
    golden.judge([result])
    return result


def _golden(result: ScenarioResult) -> list[object]:
    return [c for c in result.checks if c.pointer == golden.POINTER]


@pytest.mark.parametrize("name", sorted(CHANGES))
def test_a_one_line_change_fails_at_seed_naming_the_first_divergence(
        tmp_path: Path, name: str) -> None:
    relative, old, new, scenario, transport, named = CHANGES[name]
    result = _judged(tmp_path, (relative, old, new), scenario, transport)
    [check] = [c for c in result.checks if c.pointer == golden.POINTER]
    others = [c for c in result.checks if c.pointer != golden.POINTER and not c.passed]
    assert others == [], "the scenario's own checks already see this change: pick another"
    assert result.status == "failed" and not check.passed
    category, step, field, expected, got = named
    assert isinstance(check.expected, dict)
    assert check.expected["category"] == category
    assert check.expected["step"] == step
    assert str(check.expected["field"]).startswith(field)
    if expected is not None:
        assert (check.expected["value"], check.got) == (expected, got)
    assert check.expected["value"] != check.got
    assert f"first divergence in {golden.BY_NAME[category].title}, {step}, at " in check.message
    assert result.reason.startswith("/golden: the trace departs from the golden trace")


def test_the_unchanged_copy_matches_its_golden_traces(tmp_path: Path) -> None:
    for transport in ("stdio", "http"):
        result = _judged(tmp_path / transport, None, "wake.fresh-session.inject-once",
                         transport)
        [check] = _golden(result)
        assert check.passed, check.message  # type: ignore[attr-defined]
        assert result.status == "passed"
