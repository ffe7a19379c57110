"""``diff`` and ``matrix`` against a real TypeScript bridge: the mirror and its one departure.

``mirror.ts`` copies the reference bridge on what it claims to do and departs on exactly one
behaviour (it injects the wake-up on every prompt, WAKE-02). ``MIRROR_SELECTION`` is the part of
the catalogue that exercises what the mirror claims, declared honestly as ``stdio,http,wakeup``:
tools registered with their schemas (TOOL-01), palace errors passed through (TOOL-04), the
wake-up on a fresh and a /new session (WAKE-01, WAKE-02) and none on a resumed one (WAKE-03). Left
out on purpose, because the mirror does not claim them and differs for real: respawns and the
tolerant first start (STDIO-05/09, ``tool.unavailable.*``), per-request timeouts
(``wake.diary-timeout.*``), and a prompt with no ``session_start`` before it (the mirror
connects at session_start, so it has no tools there: ``wake.no-session-start.*``).

The matrix page is opened in headless Chromium, so the statuses and drill-downs are read from
the DOM a browser built (after the page's own script ran), not from the generator's text.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from palace_conformance.runner.compare.matrix import read_html_cells

from .support import EXTENSIONS

LAUNCH = "from palace_conformance.cli import main; main()"
PROFILE_LABEL = "mirror"  # the mirror run through its profile is named by it
DEPARTURE = "wake.fresh-session.inject-once"
#: a fresh palace's "Chroma database missing" reads are failures to the mirror as to the reference
#: (nothing injected at the first prompt); only the planted departure (no disarming) shows, later
FRESH_PALACE = "wake.fresh-palace.silent-until-first-write"
MIRROR_SELECTION = (
    "tool.register.schemas-passed-through",
    "tool.errors.codes-and-data-kept",
    DEPARTURE,
    "wake.new-session.injects-with-agent-name",
    "wake.resumed-session.no-injection",  # stdio only
    FRESH_PALACE,
)
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run")
CHROMIUM_MISSING = ("chromium not found on PATH: .ci/run installs it before the tests "
                    "(.ci/install-system-packages: apt-get install chromium); run that script, "
                    "or install Chromium yourself, to check the HTML matrix report")


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMPALACE_", "PALACE_"))}
    return subprocess.run([sys.executable, "-c", LAUNCH, *args], capture_output=True, text=True,
                          timeout=600, check=False, cwd=cwd, env=env)


def selecting(*ids: str) -> list[str]:
    return [arg for sid in ids for arg in ("--select", sid)]


@pytest.fixture(scope="session")
def chromium() -> str:
    """The Chromium binary, or a clear failure naming the step that installs it (never a skip:
    the HTML report is part of what this suite promises; never an install: no test installs)."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        pytest.fail(CHROMIUM_MISSING)
    return found


def browse(binary: str, tmp: Path, url: str, *extra: str) -> subprocess.CompletedProcess[str]:
    profile = tmp / f"profile-{len(list(tmp.glob('profile-*')))}"
    argv = [binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *extra, url]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False,
                          env={**os.environ, "HOME": str(tmp)})
    assert done.returncode == 0, f"chromium failed ({done.returncode}): {done.stderr[-800:]}"
    return done


def mirror_profile(tmp: Path) -> str:
    """The mirror as a profile: it claims three of the seed's features, so it is no whole copy
    of the seed and is not judged against the golden traces (fixtures/README.md)."""
    path = tmp / "mirror.json"
    path.write_text(json.dumps({"schema_version": 1, "name": "mirror",
                                "entry": f"pi-extension:{EXTENSIONS / 'mirror.ts'}",
                                "claims": {"capabilities": ["stdio", "http", "wakeup"],
                                           "seed_copy": True}}))
    return str(path)


def test_diff_names_exactly_the_mirrors_planted_departure(tmp_path: Path) -> None:
    out = tmp_path / "drift.json"
    done = cli("diff", "--level", "seed",  # the mirror claims to copy the seed: judged as one
               "--bridge", "reference", "--profile", mirror_profile(tmp_path),
               *selecting(*MIRROR_SELECTION),
               "--json", str(out), cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["incomparable"] == [] and report["not_applicable"] == []
    assert sorted(d["id"] for d in report["drift"]) == [
        f"{FRESH_PALACE}[http]", f"{FRESH_PALACE}[stdio]",
        f"{DEPARTURE}[http]", f"{DEPARTURE}[stdio]"]
    fresh = [d for d in report["drift"] if d["id"].startswith(FRESH_PALACE)]
    for drift in fresh:  # a mirror that injected the missing-database text drifts at the first
        assert drift["step"]["label"] == "second-prompt", drift["step"]
    for drift in report["drift"]:
        if drift in fresh:
            continue
        assert drift["kind"] == "trace" and drift["statuses"] == ["passed", "failed"]
        assert drift["step"]["label"] == "second-prompt"
        assert drift["step"]["op"] == "event before_agent_start"
        assert drift["step_pointer"] == "/result/messages/0"
        assert drift["left"] is None  # the reference injects nothing the second time
        assert drift["right"]["custom_type"] == "mempalace-wakeup"
    assert len(report["agreed"]) == 7  # four scenarios on both transports, one on stdio only
    assert report["masked"] == [
        "registered commands (only one side has diary_command, declared or detected)",
        "mempalace-mailbox messages (only one side has mailbox, declared or detected)",
        "helper runs (exec effects, helper_run records) and mempalace_mine calls (only one side "
        "has feeding, declared or detected)"]
    for drift in fresh:  # the mirror reads the palace again: only the wire shows it
        assert [c["category"] for c in drift["categories"]] == ["wire"]
    for drift in report["drift"]:  # the departure is agent-facing first, then on the wire
        if drift in fresh:
            continue
        assert [c["category"] for c in drift["categories"]] == ["injected", "wire"]
        wire = drift["categories"][1]
        assert wire["step"]["label"] == "second-prompt" and wire["left"] is None
    assert f'DRIFT {DEPARTURE}[stdio]  reference: passed  {PROFILE_LABEL}: failed' in done.stdout
    assert 'step #4 event before_agent_start "second-prompt", at /result/messages/0' in (
        done.stdout)


def test_matrix_page_reads_right_in_headless_chromium(tmp_path: Path, chromium: str) -> None:
    page = tmp_path / "matrix.html"
    done = cli("matrix", "--level", "seed", "--bridge", "reference",
               "--profile", mirror_profile(tmp_path), "--transport", "stdio",
               *selecting(DEPARTURE, "diary.command.no-topic-default-agent",
                          "tool.register.schemas-passed-through"),
               "--html", str(page), "--markdown", str(tmp_path / "matrix.md"), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    failing_cell = f"{DEPARTURE}--b1--stdio"
    dom = browse(chromium, tmp_path, f"{page.as_uri()}#drill-{failing_cell}",
                 "--dump-dom").stdout
    assert 'data-ready="1"' in dom  # the page's script ran in the browser
    cells = {(c["data-scenario"], c["data-bridge"]): c["data-status"]
             for c in read_html_cells(dom)
             if c["tag"] == "td" and c.get("data-transport") == "stdio"}
    assert cells == {
        (DEPARTURE, "reference"): "passed",
        (DEPARTURE, PROFILE_LABEL): "failed",
        ("diary.command.no-topic-default-agent", "reference"): "passed",
        ("diary.command.no-topic-default-agent", PROFILE_LABEL): "not_applicable",
        ("tool.register.schemas-passed-through", "reference"): "passed",
        ("tool.register.schemas-passed-through", PROFILE_LABEL): "passed",
    }
    [drill] = [c for c in read_html_cells(dom) if c["tag"] == "details"]
    assert drill["id"] == f"drill-{failing_cell}" and drill["data-cell"] == f"cell-{failing_cell}"
    assert "open" in drill  # the address named it, and the script opened it
    body = dom[dom.index(f'id="drill-{failing_cell}"'):]
    body = body[:body.index("</details>")]
    assert "/steps/4/expect/effects/0" in body and "should not be there" in body
    assert '<mark data-step="second-prompt">' in body  # the trace marks the failing step
    shot = tmp_path / "matrix.png"
    browse(chromium, tmp_path, f"{page.as_uri()}#all", "--window-size=1300,1600",
           f"--screenshot={shot}")
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 30_000  # a rendered page; a blank one is ~6 KB
