"""Malformed input never crashes or hangs the stdio fake.

One long-lived ``palace-fake-mcp`` per module takes every generated line, followed by a sentinel
ping; whatever came back before the sentinel's reply must be exactly what mempalace owes that line
(see :func:`~.stdio_harness.expected_reply`): one protocol-correct answer, or nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .stdio_harness import FakeProcess, check_reply, expected_reply, rpc

FUZZ = settings(deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture])
SAFE_TOOLS = ["mempalace_status", "mempalace_kg_query", "mempalace_diary_read", "mempalace_search",
              "mempalace_kg_stats", "mempalace_list_wings", "mempalace_get_aaak_spec",
              "mempalace_kg_add", "mempalace_event_list", "mempalace_nope"]
METHODS = ["initialize", "ping", "tools/list", "tools/call", "notifications/initialized",
           "notifications/cancelled", "resources/list", "server/discover", ""]

scalars = (st.none() | st.booleans() | st.integers(-(2**70), 2**70)
           | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=30))
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                           max_leaves=20)
ids = st.none() | st.integers(-(2**60), 2**60) | st.text(max_size=12) | st.floats(
    allow_nan=False, allow_infinity=False) | st.lists(st.integers(), max_size=2)
arguments = st.dictionaries(
    st.sampled_from(["query", "entity", "agent_name", "last_n", "limit", "subject", "predicate",
                     "object", "stream", "wing", "bogus"]), json_values, max_size=4)
call_params = st.fixed_dictionaries({}, optional={
    "name": st.sampled_from(SAFE_TOOLS) | json_values, "arguments": arguments | json_values})
rpc_ish = st.fixed_dictionaries({}, optional={
    "jsonrpc": st.sampled_from(["2.0", "1.0", 2, None]),
    "id": ids,
    "method": st.sampled_from(METHODS) | st.text(max_size=20) | json_values,
    "params": call_params | json_values,
    "result": json_values,
})


@pytest.fixture(scope="module")
def fake(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FakeProcess]:
    root: Path = tmp_path_factory.mktemp("fuzz")
    with FakeProcess(root) as proc:
        yield proc
    assert proc.proc.returncode in (0, -9), proc.stderr_text()[-2000:]


class Exchanger:
    """Send one line, then a sentinel ping, and return everything that came back before it."""

    def __init__(self, fake: FakeProcess) -> None:
        self.fake = fake
        self.serial = 0

    def __call__(self, line: bytes) -> list[dict[str, Any]]:
        self.serial += 1
        sentinel = f"sentinel-{self.serial}"
        self.fake.send(line)
        self.fake.send(rpc("ping", None, sentinel))
        out = []
        while True:
            reply = json.loads(self.fake.recv_line(timeout=20))
            if reply.get("id") == sentinel:
                assert reply["result"] == {}
                return out
            out.append(reply)


@pytest.fixture(scope="module")
def exchange(fake: FakeProcess) -> Exchanger:
    return Exchanger(fake)


def check(exchange: Exchanger, line: bytes) -> None:
    replies = exchange(line)
    expected = expected_reply(line)
    if expected is None:
        assert replies == [], (line[:200], replies)
    else:
        assert len(replies) == 1, (line[:200], replies)
        check_reply(expected, replies[0])


def as_line(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode("utf-8", "replace")


@settings(FUZZ, max_examples=120)
@given(st.binary(max_size=200).map(lambda b: b.replace(b"\n", b" ")))
def test_random_bytes(exchange: Exchanger, line: bytes) -> None:
    check(exchange, line)


@settings(FUZZ, max_examples=100)
@given(json_values)
def test_random_json_values(exchange: Exchanger, value: Any) -> None:
    check(exchange, as_line(value))


@settings(FUZZ, max_examples=200)
@given(rpc_ish)
def test_random_jsonrpc_ish_objects(exchange: Exchanger, message: dict[str, Any]) -> None:
    check(exchange, as_line(message))


@settings(FUZZ, max_examples=15)
@given(st.integers(50_000, 2_000_000), st.sampled_from(["param", "method", "id", "raw"]))
def test_huge_strings(exchange: Exchanger, size: int, where: str) -> None:
    big = "\u00e9" * (size // 2) + "x" * (size - size // 2)
    message: Any = {
        "param": rpc("tools/call", {"name": "mempalace_kg_query", "arguments": {"entity": big}}),
        "method": rpc(big),
        "id": rpc("ping", None, big),
        "raw": big,
    }[where]
    check(exchange, message.encode() if isinstance(message, str) else as_line(message))


@settings(FUZZ, max_examples=30)
@given(st.integers(1, 300), st.sampled_from(["[", "{\"a\":"]), st.booleans())
def test_deep_nesting(exchange: Exchanger, depth: int, opener: str, closed: bool) -> None:
    closer = "]" if opener == "[" else "}"
    body = opener * depth + "1" + (closer * depth if closed else "")
    check(exchange, json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping",
                                "params": {"_meta": None}})[:-1].encode()
          + b', "deep": ' + body.encode() + b"}")


def test_after_the_barrage_a_ping_still_answers(fake: FakeProcess, exchange: Exchanger) -> None:
    for line in (b"\xff" * 10, b"[]", b'{"id": 1}', b"{" * 2000, b'"x"' * 3):
        check(exchange, line)
    fake.ping()
    assert fake.alive()
    fake.close_stdin()
    assert fake.wait() == 0
