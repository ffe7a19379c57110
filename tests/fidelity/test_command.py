"""``palace-conformance fidelity`` without a real server, or with a bad option: one line."""

from __future__ import annotations

import pytest

from palace_conformance.cli import main


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as done:
        main(argv)
    return int(done.value.code or 0), capsys.readouterr().err


def test_no_real_server_is_one_line_naming_the_fix(monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("PALACE_REAL_PYTHON", raising=False)
    code, err = _run(["fidelity", "--quick"], capsys)
    assert code == 2
    assert err.count("\n") == 1
    assert err.startswith("palace-conformance fidelity: the real mempalace server is not "
                          "configured")
    assert "--real-python" in err and "tox -e real-palace" in err


def test_a_named_python_that_is_not_there(tmp_path: object,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _run(["fidelity", "--real-python", "/nonexistent/python"], capsys)
    assert code == 2 and err.count("\n") == 1 and "is not an executable Python" in err


def test_jobs_must_be_a_count(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _run(["fidelity", "--jobs", "0"], capsys)
    assert code == 2 and err.count("\n") == 1 and "not a session count" in err
