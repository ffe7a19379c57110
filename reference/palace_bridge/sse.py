"""A server-sent-events decoder without I/O (HTML living standard, "event stream interpretation").

Comments (``: ping``) and fields we do not use are skipped; an event is dispatched on a blank line;
an event left unterminated when the stream ends is dropped, as the standard says.

Linear in the input however it is chunked: each character is scanned once, and an unterminated
line is kept as a list of pieces, joined once when it ends. Bounded: a line, or an event's data,
longer than ``max_event`` characters is a :class:`SSEEventTooLarge`, not a growing buffer.
"""

from __future__ import annotations

from dataclasses import dataclass

#: the default bound on one line and on one event's data, in characters
DEFAULT_MAX_EVENT = 64 * 1024 * 1024


class SSEEventTooLarge(ValueError):
    """The server sent a line, or an event, longer than the decoder's ``max_event``."""


@dataclass(frozen=True)
class Event:
    data: str
    event: str = "message"
    id: str | None = None
    retry_ms: int | None = None


class SSEDecoder:
    def __init__(self, max_event: int = DEFAULT_MAX_EVENT) -> None:
        self.max_event = max_event
        self._line_parts: list[str] = []  # the unterminated line so far
        self._line_size = 0
        self._pending_cr = False
        self._data: list[str] = []
        self._data_size = 0
        self._event = ""
        self._id: str | None = None
        self._retry: int | None = None
        self._bom_checked = False
        self._decoder_tail = b""
        #: the id of the last event dispatched (MCP: what a resuming GET sends as Last-Event-ID)
        self.last_event_id: str | None = None

    def resumed(self) -> SSEDecoder:
        """A decoder for the stream that resumes this one: the last event id and ``retry`` carry
        over (a resumed stream that ends before any new event resumes from the same point)."""
        decoder = SSEDecoder(self.max_event)
        decoder.last_event_id = self.last_event_id
        decoder._retry = self._retry
        decoder._id = self.last_event_id
        return decoder

    @property
    def retry_ms(self) -> int | None:
        """The server's reconnection time, from the last ``retry`` field seen (it applies at
        once, dispatched or not, as the standard says)."""
        return self._retry

    def feed(self, chunk: bytes) -> list[Event]:
        data = self._decoder_tail + chunk
        try:
            text = data.decode("utf-8")
            self._decoder_tail = b""
        except UnicodeDecodeError as exc:
            if exc.start >= len(data) - 3:  # a multi-byte character split across chunks
                text = data[: exc.start].decode("utf-8")
                self._decoder_tail = data[exc.start:]
            else:
                text = data.decode("utf-8", errors="replace")
                self._decoder_tail = b""
        if not self._bom_checked and text:
            text = text.removeprefix("\ufeff")
            self._bom_checked = True
        return self._feed_text(text)

    def _feed_text(self, text: str) -> list[Event]:
        if self._pending_cr and text.startswith("\n"):
            text = text[1:]
        self._pending_cr = False
        events: list[Event] = []
        ends = _LineEnds(text)
        start = 0
        while (cut := ends.next(start)) is not None:
            end, width = cut
            if width == 1 and text[end] == "\r" and end + 1 == len(text):
                # a lone CR at the end may be the first half of CRLF
                self._pending_cr = True
            event = self._line(self._take_line(text[start:end]))
            if event is not None:
                events.append(event)
            start = end + width
        if start < len(text):
            self._line_size += len(text) - start
            self._line_parts.append(text[start:])
            if self._line_size > self.max_event:
                raise self._too_large("a line")
        return events

    def _take_line(self, last_piece: str) -> str:
        if not self._line_parts:
            if len(last_piece) > self.max_event:
                raise self._too_large("a line")
            return last_piece
        self._line_size += len(last_piece)
        if self._line_size > self.max_event:
            raise self._too_large("a line")
        self._line_parts.append(last_piece)
        line = "".join(self._line_parts)
        self._line_parts = []
        self._line_size = 0
        return line

    def _too_large(self, what: str) -> SSEEventTooLarge:
        self._line_parts, self._line_size = [], 0
        self._data, self._data_size = [], 0
        return SSEEventTooLarge(f"{what} of the event stream grew past {self.max_event} "
                                "characters")

    def _line(self, line: str) -> Event | None:
        if line == "":
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data_size += len(value) + 1
            if self._data_size > self.max_event:
                raise self._too_large("an event")
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" not in value:
                self._id = value
        elif name == "retry" and value.isdigit():
            self._retry = int(value)
        return None

    def _dispatch(self) -> Event | None:
        self.last_event_id = self._id  # set even for an event without data (the standard's order)
        if not self._data:
            self._event = ""
            return None
        event = Event("\n".join(self._data), self._event or "message", self._id, self._retry)
        self._data = []
        self._data_size = 0
        self._event = ""
        return event


class _LineEnds:
    """Finds CRLF, LF or CR in one piece of text, remembering where the next LF and the next CR
    are, so that no character is searched twice (a run of CR-only lines stays linear)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._lf = -2  # -2: not searched yet; -1: none left
        self._cr = -2

    def next(self, start: int) -> tuple[int, int] | None:
        """Index and width of the first line end at or after ``start``."""
        if self._lf == -2 or 0 <= self._lf < start:
            self._lf = self.text.find("\n", start)
        if self._cr == -2 or 0 <= self._cr < start:
            self._cr = self.text.find("\r", start)
        lf, cr = self._lf, self._cr
        if cr >= 0 and (lf < 0 or cr < lf):
            return (cr, 2) if lf == cr + 1 else (cr, 1)
        if lf >= 0:
            return lf, 1
        return None
