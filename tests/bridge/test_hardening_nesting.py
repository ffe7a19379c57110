"""Issue 13: JSON nested past the decoder's recursion limit, or a number past ``int()``'s digit
limit, is bad input like any other: the bridge's decoders call it invalid, never raise."""

from __future__ import annotations

import pytest

from palace_bridge import jsonrpc
from palace_bridge.config import parse_preamble
from palace_bridge.http import _error_body

HOSTILE = [b"[" * 100_000 + b"]" * 100_000, b'{"jsonrpc": "2.0", "id": ' + b"9" * 5000 + b"}"]


@pytest.mark.parametrize("line", HOSTILE)
def test_parse_calls_it_invalid(line: bytes) -> None:
    message = jsonrpc.parse(line)
    assert isinstance(message, jsonrpc.Invalid)
    assert message.reason.startswith("not JSON (")


@pytest.mark.parametrize("body", HOSTILE)
def test_an_error_body_the_decoder_cannot_take_is_no_error_body(body: bytes) -> None:
    assert _error_body(body, "application/json") is None


@pytest.mark.parametrize("raw", [line.decode() for line in HOSTILE])
def test_a_preamble_the_decoder_cannot_take_is_malformed(raw: str) -> None:
    assert parse_preamble(raw) is None
