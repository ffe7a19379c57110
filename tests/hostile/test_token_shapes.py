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
