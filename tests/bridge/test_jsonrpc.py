"""Framing and correlation without I/O: strict ids, duplicates, null ids, chunk boundaries."""

from __future__ import annotations

import json
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from palace_bridge import jsonrpc
from palace_bridge.jsonrpc import (
    Correlator,
    IdAllocator,
    Invalid,
    LineDecoder,
    LineTooLong,
    Notification,
    Response,
    ServerRequest,
)


def test_ids_are_never_reused():
    ids = IdAllocator()
    assert [ids.next() for _ in range(5)] == [1, 2, 3, 4, 5]


def test_encode_is_one_line_even_with_newlines_in_strings():
    data = jsonrpc.encode(jsonrpc.request(1, "tools/call", {"arguments": {"t": "a\nb → c"}}))
    assert data.endswith(b"\n") and data.count(b"\n") == 1
    assert json.loads(data)["params"]["arguments"]["t"] == "a\nb → c"
    assert "→".encode() in data, "raw UTF-8, like mempalace"


def test_classify_every_kind():
    assert jsonrpc.parse('{"jsonrpc":"2.0","id":1,"result":{}}') == Response(1, result={})
    error = jsonrpc.parse('{"jsonrpc":"2.0","id":2,"error":{"code":-32602,"message":"m",'
                          '"data":{"k":1}}}')
    assert isinstance(error, Response) and error.error == {"code": -32602, "message": "m",
                                                           "data": {"k": 1}}
    assert jsonrpc.parse('{"jsonrpc":"2.0","id":"s1","method":"ping"}') == \
        ServerRequest("s1", "ping", None)
    assert jsonrpc.parse('{"jsonrpc":"2.0","method":"notifications/progress","params":{}}') == \
        Notification("notifications/progress", {})
    assert isinstance(jsonrpc.parse("this is not json"), Invalid)
    assert isinstance(jsonrpc.parse("[1,2]"), Invalid)
    assert isinstance(jsonrpc.parse('{"jsonrpc":"2.0","id":1}'), Invalid)
    assert isinstance(jsonrpc.parse('{"id":1,"error":{"message":"no code"}}'), Invalid)
    assert isinstance(jsonrpc.parse(b"\xff\xfe"), Invalid)


def test_correlation_is_type_strict_and_delivers_once():
    pending: Correlator[str] = Correlator()
    pending.register(1, "tools/call", "call-1")
    assert pending.match(Response("1", result={})) is None, '"1" is not 1: ids match by JSON type'
    assert pending.match(Response(True, result={})) is None, "True is not 1"
    assert pending.match(Response(1, result={})) == ("tools/call", "call-1")
    assert pending.match(Response(1, result={})) is None, "a duplicate is ignored"
    assert pending.match(Response(99, result={})) is None, "unknown ids are ignored"


def test_errors_with_null_or_absent_id_are_never_correlated():
    pending: Correlator[str] = Correlator()
    pending.register(1, "tools/call", "only-one-pending")
    null_id = jsonrpc.parse('{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}')
    absent = jsonrpc.parse('{"jsonrpc":"2.0","error":{"code":-32700,"message":"x"}}')
    assert isinstance(null_id, Response) and isinstance(absent, Response)
    assert pending.match(null_id) is None and pending.match(absent) is None
    assert 1 in pending


def test_forget_and_drain():
    pending: Correlator[str] = Correlator()
    pending.register(1, "a", "x")
    pending.register(2, "b", "y")
    with pytest.raises(ValueError):
        pending.register(2, "b", "z")
    assert pending.forget(1) == ("a", "x")
    assert pending.match(Response(1, result={})) is None, "late answer after a timeout"
    assert pending.drain() == [(2, "b", "y")]
    assert len(pending) == 0


def test_line_decoder_skips_blank_lines_and_strips_cr():
    decoder = LineDecoder()
    assert decoder.feed(b'{"a":1}\r\n\n  \n{"b"') == [b'{"a":1}']
    assert decoder.feed(b":2}\n") == [b'{"b":2}']
    assert decoder.pending == 0


def test_line_decoder_refuses_an_endless_line():
    decoder = LineDecoder(max_line=10)
    with pytest.raises(LineTooLong):
        decoder.feed(b"x" * 11)
    assert decoder.pending == 0


@settings(max_examples=150, deadline=None)
@given(lines=st.lists(st.text(min_size=1).filter(lambda s: s.strip() and "\n" not in s
                                                 and "\r" not in s), max_size=8),
       cuts=st.lists(st.integers(0, 400), max_size=10))
def test_line_decoder_is_independent_of_chunk_boundaries(lines, cuts):
    stream = b"".join(line.encode() + b"\n" for line in lines)
    points = sorted({min(c, len(stream)) for c in cuts})
    chunks = [stream[a:b] for a, b in zip([0, *points], [*points, len(stream)], strict=True)]
    decoder = LineDecoder()
    out = [line for chunk in chunks for line in decoder.feed(chunk)]
    assert out == [line.encode() for line in lines]


def test_line_decoder_costs_linear_time_in_an_unterminated_line():
    """Issue 13: each chunk used to search the whole unterminated line again for a newline
    (32 MiB in 512-byte chunks: well over ten seconds of CPU). The bound only says "not
    quadratic"."""
    decoder = LineDecoder()
    piece = b"x" * 512
    began = time.process_time()
    for _ in range(32 * 2048):
        assert decoder.feed(piece) == []
    lines = decoder.feed(b"\n")
    cpu_s = time.process_time() - began
    assert [len(line) for line in lines] == [32 * 1024 * 1024]
    assert cpu_s < 10.0


def test_a_stdio_message_may_be_64_mib_and_not_a_byte_more() -> None:
    """docs/choices.md: one stdio message is at most 64 MiB, the reference's own bound (no
    scenario may pin it: another bridge may take a longer line whole). Both sides of it, with
    the decoder's default, as the bridge builds it."""
    bound = 64 * 1024 * 1024
    decoder = LineDecoder()
    assert decoder.feed(b"x" * bound) == []  # 64 MiB without a newline yet: still a message
    with pytest.raises(LineTooLong, match=f"grew past {bound} bytes"):
        decoder.feed(b"x")
    assert decoder.feed(b'{"jsonrpc":"2.0"}\n') == [b'{"jsonrpc":"2.0"}']  # the stream goes on
