"""Issue 25, item 3: token-shaped strings (whoever printed them) are masked by the one redactor,
in console text, reports and recorded drafts, with a note of what was masked in a draft."""

from __future__ import annotations

import json
import sys

import pytest

from palace_conformance.record.draft import Cleaner, build_draft
from palace_conformance.redaction import (
    SHAPE_MARKER,
    ConsoleRedaction,
    RedactingWriter,
    Redactor,
    mask_token_shapes,
)
from palace_conformance.relay.stdio import FROM_PALACE, TO_PALACE, Message

GHP = "ghp_" + "aB3" * 12
SHAPED = [GHP, "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
          "sk-live-4f9a8b7c6d5e4f3a2b1c", "sk-proj-abcdefghijklmnop1234",
          "xoxb-123456789012-abcdefghijkl", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.sig_"
          "nature-part"]


@pytest.mark.parametrize("token", SHAPED)
def test_each_shape_is_masked_in_text(token: str) -> None:
    text, kinds = mask_token_shapes(f"palace said: {token} (done)")
    assert token not in text and SHAPE_MARKER in text and len(kinds) == 1
    assert Redactor([], shapes=True).text(f"x={token}") == f"x={SHAPE_MARKER}"


def test_a_random_bearer_value_is_masked_and_a_plain_word_is_not() -> None:
    masked, kinds = mask_token_shapes("Authorization: Bearer Zq8vN2pLx7RtY4mKc9WbE3sD")
    assert "Zq8vN2pLx7RtY4mKc9WbE3sD" not in masked and kinds == ["bearer value"]
    for plain in ("Bearer placeholder-token-for-tests", "the task-list-is-long-enough-here",
                  "mempalace_search returned 12 drawers"):
        assert mask_token_shapes(plain) == (plain, [])


def test_a_recorded_draft_masks_token_shaped_strings_with_a_note() -> None:
    """A palace answer (and an argument) holding tokens that came neither from the environment
    nor from a header: masked in the arguments, left out of the expectations, noted."""
    messages = [
        Message(TO_PALACE, 0.0, {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "mempalace_add_drawer", "arguments": {"content": f"key {SHAPED[2]}"}}}),
        Message(FROM_PALACE, 0.0, {"jsonrpc": "2.0", "id": 1, "result": {
            "content": [{"type": "text", "text": json.dumps({"note": GHP, "ok": True})}],
            "isError": False}}),
    ]
    draft = build_draft(messages, "record.draft.masked", cleaner=Cleaner())
    text = json.dumps(draft)
    assert GHP not in text and SHAPED[2] not in text
    assert SHAPE_MARKER in text
    assert "Token-shaped strings masked (api key x1, github token x1)" in draft["description"]


def test_the_console_writer_redacts_across_writes(capsys: pytest.CaptureFixture[str]) -> None:
    console = ConsoleRedaction()
    console.add(["s3cret-value-1234"])
    writer = RedactingWriter(sys.stdout, console.redactor)
    writer.write("host said s3cret-")  # a secret split over two writes is still found
    writer.write("value-1234 and " + GHP + "\n")
    writer.write("no newline yet: s3cret-value-1234")
    writer.flush()
    out = capsys.readouterr().out
    assert "s3cret-value-1234" not in out and GHP not in out
    assert out.count("<redacted-secret-1>") == 2 and SHAPE_MARKER in out


def test_the_anchored_scan_masks_exactly_what_a_whole_text_scan_masks() -> None:
    """mask_token_shapes tries the shapes only where one may start (SHAPE_STARTS, after
    SHAPE_AFTER): a shape whose start is not listed there would go unmasked. Checked against the
    plain re.sub over the whole text, on texts packed with shapes' beginnings and near misses."""
    import random
    import re

    from palace_conformance import redaction

    def whole_text(text: str) -> str:
        def one(match: re.Match[str]) -> str:
            kind = redaction.TOKEN_SHAPES[int((match.lastgroup or "s0")[1:])][0]
            if kind == "bearer value" and not redaction._high_entropy(match.group(0)):
                return match.group(0)
            return SHAPE_MARKER
        return redaction._SHAPES.sub(one, text)

    parts = [*SHAPED, "gh", "ghp_", "sk-", "xox", "xoxb-", "eyJ", "Bearer ", "github_pat_", ".",
             "_", " ", "-", "a", "Z", "0", "é", "\\n", "AbC1x2Y3z4W5v6U7t8S9"]
    chance = random.Random(30)
    for _ in range(3000):
        text = "".join(chance.choice(parts) for _ in range(chance.randint(0, 40)))
        assert mask_token_shapes(text)[0] == whole_text(text), text


def test_a_long_text_is_redacted_as_its_pieces_are() -> None:
    """Redactor.text looks only for the forms present in a long text (LONG_TEXT): each secret,
    its JSON-escaped and base64 forms, and one secret inside another, are still replaced there
    exactly as in a short text."""
    import base64

    from palace_conformance.redaction import LONG_TEXT

    secrets = ["tok-secret-31d9ae", "zq-zq-7c41d9e2a8f0zq", "zq-zq-7c41", 'quo"te-secret-1']
    redactor = Redactor(secrets)
    pieces = ["filler " * 40, "Authorization: Basic "
              + base64.b64encode(b"user:tok-secret-31d9ae").decode(), " zq-zq-7c41d9e2a8f0zq ",
              " zq-zq-7c41 ", json.dumps({"v": 'quo"te-secret-1'}), " plain"]
    piece = "".join(pieces)
    long_text = piece * (LONG_TEXT // len(piece) + 1)
    assert len(long_text) >= LONG_TEXT
    assert redactor.text(long_text) == redactor.text(piece) * (LONG_TEXT // len(piece) + 1)
    assert not redactor.leaks(redactor.text(long_text))
    assert "<redacted-secret-" in redactor.text(piece)
