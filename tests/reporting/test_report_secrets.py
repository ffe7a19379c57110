"""Issue 13: no file a run writes holds a secret, in any encoding. A bridge that spills the bearer
token and the runner's own secrets into its stderr and results (as they are, base64-encoded in a
Basic credential, percent-encoded) used to leave them in ``--json``/``results.json``, JUnit, the
HTML matrix and the raw per-run copies under ``runs/``; every report and copy now goes through
the one redaction the bundles use.

The scan walks every file under the test's directory (every report, the report dir with its
bundles, ``runs/`` and ``last-failed.json``, the matrix and its saved runs) and the console
output, and looks for each secret as written, JSON-escaped, percent-encoded and inside base64 at
each byte alignment, by its own statement of those forms (not the redactor's)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest

from .support import LEAKY, cli, shipped_file

BEARER = "http.auth.bearer-on-every-request"
SELECTION = [BEARER, "tool.errors.rpc-errors-and-results-kept",
             "http.session.404-reinit-and-retry-once"]
BEARER_TOKEN = "tok-conformance-5b1d2e"
ENV_SECRET = "sk-live-runner-env-7c2e94d1"
ENV_PASSWORD = "hunter2/+&=?pass word"  # percent-encoding changes it
SECRETS = (BEARER_TOKEN, ENV_SECRET, ENV_PASSWORD)


def forms(secret: str) -> dict[str, bytes]:
    """Every way ``secret`` may show up in a file: name -> bytes to look for."""
    found = {"raw": secret.encode(), "json": json.dumps(secret)[1:-1].encode(),
             "url": quote(secret, safe="").encode(), "form": quote_plus(secret).encode()}
    data = secret.encode()
    for shift in range(3):  # the secret's bytes at each offset of a base64 group
        for alphabet, encode in (("b64", base64.b64encode), ("b64url", base64.urlsafe_b64encode)):
            chars = encode(b"\x00" * shift + data)
            first = -(-shift * 8 // 6)  # the first character made of the secret's bits only
            last = (shift + len(data)) * 8 // 6
            found[f"{alphabet}@{shift}"] = chars[first:last]
    return found


def leaks_in(data: bytes) -> list[str]:
    return [f"{secret[:6]}... as {name}" for secret in SECRETS
            for name, form in forms(secret).items() if form in data]


def scan(root: Path) -> tuple[list[Path], list[str]]:
    """(every file under ``root``, each leak found as 'file: what')."""
    files = sorted(p for p in root.rglob("*") if p.is_file())
    return files, [f"{p.relative_to(root)}: {leak}" for p in files
                   for leak in leaks_in(p.read_bytes())]


def test_the_scan_finds_every_form_it_looks_for() -> None:
    """The scanner's control: each secret planted in each form is found, inside other text."""
    for secret in SECRETS:
        for name, form in forms(secret).items():
            assert leaks_in(b"x " + form + b" y"), (secret, name)
        basic = base64.b64encode(f"user:{secret}".encode())
        assert any("b64@2" in leak for leak in leaks_in(b"Basic " + basic))
    assert leaks_in(b"nothing to see <redacted-secret-1>") == []


def test_no_file_a_run_writes_holds_a_secret(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PC_TEST_API_TOKEN", ENV_SECRET)  # inherited by the bridge
    monkeypatch.setenv("PC_TEST_DB_PASSWORD", ENV_PASSWORD)
    report = tmp_path / "report"
    outputs = [tmp_path / name for name in ("run.json", "junit.xml", "summary.md")]
    code, out, err = cli(capsys, "run", *map(shipped_file, SELECTION), "--bridge", LEAKY,
                         "--report-dir", str(report), "--json", str(outputs[0]), "--junit",
                         str(outputs[1]), "--markdown", str(outputs[2]))
    assert code == 1, out
    console = (out + err).encode()

    # a saved result read back (matrix --from) and a live run (matrix --bridge) alike
    html, md, saved = tmp_path / "m.html", tmp_path / "m.md", tmp_path / "saved"
    code, out, err = cli(capsys, "matrix", "--from", str(outputs[0]), "--bridge", LEAKY,
                         "--select", BEARER, "--html", str(html), "--markdown", str(md),
                         "--save-runs", str(saved))
    assert code == 0, out
    console += (out + err).encode()

    files, leaks = scan(tmp_path)
    names = {str(p.relative_to(tmp_path)) for p in files}
    runs = report / "runs" / BEARER / "http"
    assert {"report/results.json", "report/junit.xml", "report/summary.md",
            "report/last-failed.json", "run.json", "junit.xml", "summary.md", "m.html",
            "m.md"} <= names
    assert {p.name for p in runs.iterdir()} >= {"host-stderr.txt", "result.json",
                                                "journal.jsonl", "fake-stderr.txt"}
    assert any(name.startswith("report/bundles/") for name in names)
    assert any(name.startswith("saved/") for name in names)
    assert leaks == [], leaks
    assert leaks_in(console) == []
    # the leak is still there to see, as a marker, where the bridge put it
    for spilled in (report / "results.json", runs / "host-stderr.txt", runs / "result.json"):
        text = spilled.read_text(encoding="utf-8")
        assert "leaky bridge: debug env" in text and "<redacted-secret-" in text, spilled
    assert "Authorization: Basic " in (runs / "host-stderr.txt").read_text()
    assert any("<redacted-secret-" in p.read_text(errors="replace") for p in files
               if p.parent == saved or p in (html, md))
