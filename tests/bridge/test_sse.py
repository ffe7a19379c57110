"""The SSE decoder: comments, multi-line data, CR/LF/CRLF, and any chunking."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from palace_bridge.sse import Event, SSEDecoder


def decode(data: bytes) -> list[Event]:
    return SSEDecoder().feed(data)


def test_comments_and_empty_keepalives_produce_nothing():
    assert decode(b": ping\n\n: another\n\n") == []


def test_event_fields():
    events = decode(b"event: message\nid: e1\nretry: 200\ndata: {\"a\":\ndata: 1}\n\n")
    assert events == [Event('{"a":\n1}', "message", "e1", 200)]


def test_only_one_space_after_the_colon_is_dropped():
    assert decode(b"data:  x\n\ndata:y\n\n") == [Event(" x"), Event("y")]


def test_other_event_types_are_reported_with_their_name():
    assert decode(b"event: logstream\ndata: x\n\n")[0].event == "logstream"


def test_line_endings_and_bom():
    assert decode("\ufeffdata: a\r\n\r\ndata: b\r\rdata: c\n\n".encode()) == [
        Event("a"), Event("b"), Event("c")]


def test_unterminated_event_at_end_is_dropped():
    decoder = SSEDecoder()
    assert decoder.feed(b"data: half") == []


def test_multibyte_character_split_across_chunks():
    data = "data: →\n\n".encode()
    decoder = SSEDecoder()
    out = decoder.feed(data[:7]) + decoder.feed(data[7:])
    assert out == [Event("→")]


@settings(max_examples=150, deadline=None)
@given(payloads=st.lists(st.text(alphabet=st.characters(blacklist_categories=("Cs",),
                                                         blacklist_characters="\r\n\0"),
                                 min_size=1), max_size=5),
       newline=st.sampled_from(["\n", "\r\n", "\r"]),
       cuts=st.lists(st.integers(0, 300), max_size=12))
def test_decoding_is_independent_of_chunk_boundaries(payloads, newline, cuts):
    text = "".join(f": keep-alive{newline}data: {p}{newline}{newline}" for p in payloads)
    stream = text.encode()
    points = sorted({min(c, len(stream)) for c in cuts})
    chunks = [stream[a:b] for a, b in zip([0, *points], [*points, len(stream)], strict=True)]
    decoder = SSEDecoder()
    events = [e for chunk in chunks for e in decoder.feed(chunk)]
    assert [e.data for e in events] == payloads  # exactly one space after "data:" is dropped
