"""Issue 13: JSON nested past the decoder's recursion limit (or a number past ``int()``'s digit
limit) sent to the fake gets the palace's parse error (HTTP and stdio), or the control API's
one-line 400, never a 500 or a traceback, and the fake goes on serving."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .http_support import ping, running_fake
from .stdio_harness import FakeProcess

HOSTILE = {"nested": b"[" * 100_000 + b"]" * 100_000,
           "digits": b'{"jsonrpc": "2.0", "id": ' + b"9" * 5000 + b', "method": "ping"}'}


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_mcp_answers_parse_error_and_serves_on(tmp_path: Path, kind: str) -> None:
    with running_fake(tmp_path) as fake:
        answer = fake.post(HOSTILE[kind])
        assert answer.status_code < 500, answer.text
        assert answer.json()["error"]["code"] == -32700
        assert fake.post(ping()).status_code < 500  # still serving
        assert "Traceback" not in fake.stderr()


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_control_refuses_it_in_one_line(tmp_path: Path, kind: str) -> None:
    with running_fake(tmp_path) as fake:
        answer = fake.http.post(f"{fake.base}/_fake/faults", content=HOSTILE[kind])
        assert answer.status_code == 400, answer.text
        assert "\n" not in answer.json()["error"]
        assert "Traceback" not in fake.stderr()


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_stdio_answers_parse_error_and_serves_on(tmp_path: Path, kind: str) -> None:
    """The stdio fake, as mempalace: one ``Server error`` log line and -32700 with a null id."""
    with FakeProcess(tmp_path) as fake:
        fake.send(HOSTILE[kind], end=b"\n")
        answer = json.loads(fake.recv_line())
        assert answer == {"jsonrpc": "2.0", "id": None,
                          "error": {"code": -32700, "message": "Parse error"}}
        assert fake.request("ping")["result"] == {}
        assert "Traceback" not in fake.stderr_text()
