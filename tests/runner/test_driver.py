"""The driver client against hosts that misbehave: every failure ends fast and names the op."""

from __future__ import annotations

import time

import pytest

from palace_conformance.runner.execution.driver import (
    HOST_DEADLINE,
    HOST_EXITED,
    HOST_START,
    PROTOCOL_VERSION,
    PROTOCOL_VIOLATION,
    DriverClient,
    DriverFailure,
    major,
    stderr_excerpt,
)

from .support import scripted


def client(mode: str, grace_ms: int = 200) -> DriverClient:
    return DriverClient(scripted(mode), grace_ms=grace_ms).start()


def test_a_good_host_answers_in_order_with_its_ids() -> None:
    with client("good") as host:
        hello = host.hello()
        assert hello["protocol"] == 1 and hello["capabilities"] == ["stdio", "http"]
        first = host.request("event", {"name": "x"}, deadline_ms=2000)
        second = host.request("settle", deadline_ms=2000)
        assert (first.id, second.id) == (2, 3)
        assert first.ok and first.effects == [] and first.elapsed_ms > 0


def test_a_host_that_never_answers_is_killed_at_its_deadline_and_named() -> None:
    with client("silent:call_tool") as host:
        host.hello()
        started = time.monotonic()
        with pytest.raises(DriverFailure) as caught:
            host.request("call_tool", {"name": "mempalace_status"}, deadline_ms=300)
        waited = time.monotonic() - started
        assert caught.value.kind == HOST_DEADLINE and caught.value.op == "call_tool"
        assert "'call_tool'" in str(caught.value) and "killed" in str(caught.value)
        assert 0.45 <= waited < 3.0  # 300 ms deadline + 200 ms grace, never a hang
        assert host.proc is not None and host.proc.poll() is not None  # really killed
        with pytest.raises(DriverFailure):  # and every later request fails the same way
            host.request("settle", deadline_ms=300)


def test_non_json_on_stdout_is_a_protocol_violation() -> None:
    with client("garbage:load") as host:
        host.hello()
        with pytest.raises(DriverFailure) as caught:
            host.request("load", {"env": {}}, deadline_ms=2000)
        assert caught.value.kind == PROTOCOL_VIOLATION
        assert "non-JSON" in str(caught.value) and "this is not JSON" in str(caught.value)


def test_a_line_nobody_asked_for_is_a_protocol_violation() -> None:
    with client("stray:event") as host:
        host.hello()
        host.request("event", {"name": "x"}, deadline_ms=2000)
        time.sleep(0.2)
        with pytest.raises(DriverFailure) as caught:
            host.request("settle", deadline_ms=2000)
        assert caught.value.kind == PROTOCOL_VIOLATION and "between replies" in str(caught.value)


def test_a_reply_with_the_wrong_id_is_a_protocol_violation() -> None:
    with client("wrong-id:event") as host:
        host.hello()
        with pytest.raises(DriverFailure) as caught:
            host.request("event", {"name": "x"}, deadline_ms=2000)
        assert caught.value.kind == PROTOCOL_VIOLATION and "id 102" in str(caught.value)


def test_another_protocol_major_is_refused_in_one_line() -> None:
    with client("version:2") as host, pytest.raises(DriverFailure) as caught:
        host.hello()
    assert caught.value.kind == PROTOCOL_VERSION
    assert str(caught.value) == ("host speaks driver protocol 2; this palace-conformance "
                                 "speaks 1")


def test_a_host_that_crashes_is_reported_with_its_exit_code_and_stderr() -> None:
    with client("crash:call_tool") as host:
        host.hello()
        with pytest.raises(DriverFailure) as caught:
            host.request("call_tool", {"name": "x"}, deadline_ms=5000)
    assert caught.value.kind == HOST_EXITED and caught.value.op == "call_tool"
    assert "exit code 3" in str(caught.value)
    assert "scripted host: crashing on call_tool" in str(caught.value)
    assert "crashing on call_tool" in host.stderr_text()


def test_a_missing_host_program_fails_to_start_in_one_line() -> None:
    with pytest.raises(DriverFailure) as caught:
        DriverClient(["/nonexistent/palace-host"]).start()
    assert caught.value.kind == HOST_START and "\n" not in str(caught.value)


@pytest.mark.parametrize(("version", "expected"), [(1, 1), ("1", 1), ("1.4", 1), ("2.0", 2),
                                                   (True, None), ("one", None), (None, None)])
def test_major_version_parsing(version: object, expected: int | None) -> None:
    assert major(version) == expected


NODE_CRASH = """file:///ext/bridge.ts:1
Error: Cannot find module 'mempalace-client'
Require stack:
- /ext/bridge.ts
    at Module._resolveFilename (node:internal/modules/cjs/loader:1225:15)
    at Module._load (node:internal/modules/cjs/loader:1051:27)
{
  code: 'MODULE_NOT_FOUND',
  requireStack: [ '/ext/bridge.ts' ]
}

Node.js v22.19.0
"""


def test_a_crashed_hosts_error_line_leads_its_stderr_tail() -> None:
    excerpt = stderr_excerpt(NODE_CRASH)
    assert excerpt.startswith("Error: Cannot find module 'mempalace-client' | ... | ")
    assert excerpt.endswith("Node.js v22.19.0")
    # a tail that already holds the error is left as it is
    python = "Traceback (most recent call last):\n  File \"x\", line 1\nModuleNotFoundError: no x\n"
    assert stderr_excerpt(python) == ("Traceback (most recent call last): | File \"x\", line 1 | "
                                      "ModuleNotFoundError: no x")
    assert stderr_excerpt("") == ""
