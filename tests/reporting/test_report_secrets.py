"""Issue 13 (medium): every report a run writes goes through the one redaction the bundles use.
A bridge that spills the bearer token and the runner's own secrets into its stderr and results
used to leave them in ``--json``/``results.json``, JUnit and the HTML matrix."""

from __future__ import annotations

from pathlib import Path

import pytest

from .support import LEAKY, cli, shipped_file

BEARER = "http.auth.bearer-on-every-request"
BEARER_TOKEN = "tok-conformance-5b1d2e"
ENV_SECRET = "sk-live-runner-env-7c2e94d1"


def texts_under(*roots: Path) -> dict[str, str]:
    found = {}
    for root in roots:
        files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
        for path in files:
            if "runs" not in path.relative_to(root.parent).parts:  # raw copies: not redacted
                found[str(path)] = path.read_text(encoding="utf-8")
    return found


def assert_clean(texts: dict[str, str]) -> None:
    assert texts
    for name, text in texts.items():
        assert BEARER_TOKEN not in text, name
        assert ENV_SECRET not in text, name


def test_no_report_of_a_run_holds_a_secret(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PC_TEST_API_TOKEN", ENV_SECRET)  # inherited by the bridge
    report = tmp_path / "report"
    outputs = [tmp_path / name for name in ("run.json", "junit.xml", "summary.md")]
    code, out, _ = cli(capsys, "run", shipped_file(BEARER), "--bridge", LEAKY, "--report-dir",
                       str(report), "--json", str(outputs[0]), "--junit", str(outputs[1]),
                       "--markdown", str(outputs[2]))
    assert code == 1, out
    texts = texts_under(report, *outputs)
    assert {"results.json", "junit.xml", "summary.md"} <= {Path(n).name for n in texts}
    assert_clean(texts)
    # the leak is still there to see, as a marker, where the bridge put it
    results = texts[str(report / "results.json")]
    assert "leaky bridge: debug env" in results and "<redacted-secret-" in results

    # a saved result read back (matrix --from) and a live run (matrix --bridge) alike
    html, md, saved = tmp_path / "m.html", tmp_path / "m.md", tmp_path / "saved"
    code, out, _ = cli(capsys, "matrix", "--from", str(outputs[0]), "--bridge", LEAKY,
                       "--select", BEARER, "--html", str(html), "--markdown", str(md),
                       "--save-runs", str(saved))
    assert code == 0, out
    matrix_texts = texts_under(html, md, saved)
    assert_clean(matrix_texts)
    assert any("<redacted-secret-" in text for text in matrix_texts.values())
