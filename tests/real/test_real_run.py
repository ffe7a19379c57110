"""``palace-conformance run --server real``: without a real server one line and exit 2; with one
(marked ``real_palace``) a small selection on both transports against the reference bridge (faults,
sessions and the control API through the fault relays), every applicable result passing and the
rest not applicable for the reason the scenario gives."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from palace_conformance.cli import main
from palace_conformance.real.install import ENV_PYTHON
from palace_conformance.scenarios.loader import scenarios_dir


def _file(sid: str) -> str:
    return str(scenarios_dir() / sid.split(".", 1)[0] / f"{sid}.json")


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as done:
        main(["run", *args])
    out, err = capsys.readouterr()
    return int(done.value.code or 0), out, err


def test_without_a_real_server_one_line_says_how(capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch,
                                                 tmp_path: Path) -> None:
    monkeypatch.delenv(ENV_PYTHON, raising=False)
    code, out, err = _run(capsys, _file("life.transport.default-stdio-child"), "--server", "real")
    assert code == 2 and out == ""
    [line] = err.strip().splitlines()
    assert "--server real" in line and "--real-python PY" in line and "tox -e real-palace" in line
    code, _, err = _run(capsys, _file("life.transport.default-stdio-child"), "--server", "real",
                        "--real-python", str(tmp_path / "no-python"))
    assert code == 2 and "is not an executable Python" in err and "Traceback" not in err


#: scenario -> the reason label its runs are not applicable for (None: applicable, must pass)
SELECTION = {
    "life.transport.default-stdio-child": None,
    "wake.fresh-session.inject-once": None,  # a diary seeded through real tool calls
    "http.auth.bearer-on-every-request": None,  # the real server's token check
    "stdio.respawn.after-crash": None,  # faults through the stdio fault relay
    "http.session.stateful-id-on-every-request": None,  # the HTTP relay's session table
    "http.auth.rotated-token-fails-fast": None,  # the HTTP relay's control API
    "life.shutdown.stdio-polite-close": "needs the server to exit on stdin EOF inside the "
                                        "bridge's stop grace",
}


@pytest.mark.real_palace
@pytest.mark.timeout(900)  # eight real runs, on a loaded machine
def test_a_selection_on_both_transports(capsys: pytest.CaptureFixture[str],
                                        tmp_path: Path) -> None:
    out_json = tmp_path / "run.json"
    code, out, err = _run(capsys, *(_file(s) for s in SELECTION), "--server", "real",
                          "--transport", "both", "--json", str(out_json), "--jobs", "2")
    data = json.loads(out_json.read_text())
    assert data["server"] == "real"
    applicable = [r for r in data["results"] if r["status"] != "not_applicable"]
    assert applicable and all(r["status"] == "passed" for r in applicable), out + err
    assert code == 0, out + err
    transports = {r["scenario"]: r["transport"] for r in data["results"]}
    assert {"stdio", "http"} <= set(transports.values())
    expected: dict[str, int] = {}
    for result in data["results"]:
        if result["transport"] == "parity":
            continue
        label = SELECTION[result["scenario"]]
        if label is None:
            assert result["status"] == "passed", result["reason"]
        else:
            assert result["status"] == "not_applicable"
            assert result["reason"].startswith(f"Not applicable: on the real server, {label}")
            expected[label] = expected.get(label, 0) + 1
    summary = out.strip().splitlines()[-1]
    assert summary.startswith("not applicable, by reason: ")
    for label, count in expected.items():
        assert f"{count} {label}" in summary
