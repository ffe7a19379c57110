"""The SSE decoder: comments, multi-line data, CR/LF/CRLF, and any chunking."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from palace_bridge.sse import Event, SSEDecoder, SSEEventTooLarge, _LineEnds


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


def test_an_unterminated_line_costs_linear_time():
    """Issue 13: 8 MiB of one SSE line in 1 KiB chunks took 26 s of CPU when every chunk
    copied the whole line so far; linear decoding takes a fraction of a second. The bound only
    says "not quadratic" (hundreds of times the linear cost), and the event still arrives whole."""
    decoder = SSEDecoder()
    piece = b"x" * 1024
    began = time.process_time()
    assert decoder.feed(b"data: ") == []
    for _ in range(8 * 1024):
        assert decoder.feed(piece) == []
    events = decoder.feed(b"\r\n\r\n")
    cpu_s = time.process_time() - began
    assert [len(e.data) for e in events] == [8 * 1024 * 1024]
    assert cpu_s < 10.0


def test_a_line_or_an_event_past_the_bound_is_a_protocol_error_not_a_buffer():
    decoder = SSEDecoder(max_event=100)
    decoder.feed(b"data: " + b"x" * 60)
    with pytest.raises(SSEEventTooLarge, match="a line of the event stream grew past 100"):
        decoder.feed(b"x" * 60)
    decoder = SSEDecoder(max_event=100)
    with pytest.raises(SSEEventTooLarge, match="an event of the event stream grew past 100"):
        decoder.feed(b"".join(b"data: " + b"y" * 30 + b"\n" for _ in range(4)))
    decoder = SSEDecoder(max_event=100)
    assert decoder.feed(b"data: " + b"z" * 90 + b"\n\n") == [Event("z" * 90)]  # at the bound
    decoder = SSEDecoder(max_event=100)  # a whole line past the bound, in one read
    with pytest.raises(SSEEventTooLarge, match="a line of the event stream grew past 100"):
        decoder.feed(b": " + b"w" * 150 + b"\n")


class _CountedText(str):
    """Text that counts the characters its ``find`` scans, to measure the line finder's cost
    without timing it (a count does not depend on the machine's load)."""

    scanned = 0

    def find(self, sub: str, start: int = 0, *rest: int) -> int:  # type: ignore[override]
        found = super().find(sub, start, *rest)
        type(self).scanned += (found + 1 if found >= 0 else len(self)) - start
        return found


@pytest.mark.parametrize(("run", "end"), [("\r", "\n"), ("\n", "\r")], ids=["cr-run", "lf-run"])
def test_a_run_of_one_line_end_before_the_other_is_searched_once(run: str, end: str) -> None:
    """_LineEnds keeps the next LF it found while it walks a run of CR-only lines, and the next
    CR while it walks LF-only lines, searching again only once a line end has passed it;
    searching again at every line end made one read of n such lines cost n * n / 2
    (docs/choices.md: the decoders are linear in their input)."""
    n = 2000
    text = _CountedText(run * n + "data: x" + end)
    _CountedText.scanned = 0
    ends = _LineEnds(text)
    cuts, start = [], 0
    while (cut := ends.next(start)) is not None:
        cuts.append(cut)
        start = cut[0] + cut[1]
    assert cuts == [(i, 1) for i in range(n)] + [(n + 7, 1)]
    assert _CountedText.scanned <= 3 * len(text)


def test_the_rest_of_a_read_after_a_line_end_counts_toward_the_line_bound():
    """A line begun after a line end in one read and continued in the next is bounded by all
    its characters: the bound is the reference's own (docs/choices.md)."""
    decoder = SSEDecoder(max_event=100)
    assert decoder.feed(b": ping\ndata: " + b"x" * 54) == []  # 60 characters after the LF
    with pytest.raises(SSEEventTooLarge, match="a line of the event stream grew past 100"):
        decoder.feed(b"x" * 60)


def test_the_first_event_of_a_stream_may_reach_the_bound_exactly():
    """An event's data counts one character per line for its line end (four lines of 24: 100);
    the first event of a decoder starts from nothing, as every later one does (the bound is the
    reference's own, docs/choices.md)."""
    event = b"".join(b"data: " + b"z" * 24 + b"\n" for _ in range(4)) + b"\n"
    whole = Event("\n".join(["z" * 24] * 4))
    decoder = SSEDecoder(max_event=100)
    assert decoder.feed(event) == [whole]
    assert decoder.feed(event) == [whole]
    with pytest.raises(SSEEventTooLarge, match="an event of the event stream grew past 100"):
        decoder.feed(event.replace(b"z\n\n", b"zz\n\n"))


def test_each_line_split_across_reads_is_bounded_on_its_own():
    """The line bound counts one line's characters: a line put together from two reads leaves
    nothing behind for the next (a count never reset would fail a long stream of short lines
    once their sum passed the bound; the bound is the reference's own, docs/choices.md)."""
    decoder = SSEDecoder(max_event=100)
    events = []
    for n in range(10):  # 10 events of 40 characters, each line cut in two reads: 400 in all
        events += decoder.feed(b"data: " + b"y" * 17)
        events += decoder.feed(b"y" * 17 + b"\n\n")
        assert len(events) == n + 1
    assert events == [Event("y" * 34)] * 10
