"""The fake's query guard, way by way (tests/real/test_search_query_real.py holds it to 3.11's
own guard over a seeded corpus)."""

from __future__ import annotations

import pytest

from palace_conformance.fake.search_query import clean_query

PROMPT = "You are a careful agent and you keep notes. " * 6  # 270 characters, no question


@pytest.mark.parametrize(("raw", "text", "method"), [
    ("", "", "passthrough"),
    ("   ", "   ", "passthrough"),
    ("  probe ", "probe", "passthrough"),
    ("\ud800" + "q", "\ufffdq", "passthrough"),
    ("a" * 200, "a" * 200, "passthrough"),
    (PROMPT + "\nWhat did we file?", "What did we file?", "question_extraction"),
    (PROMPT + "\nWhat did we file? '", "What did we file? '", "question_extraction"),
    (PROMPT + "\nWhy?", "You are a careful agent and you keep notes", "tail_sentence"),
    (PROMPT + "\n'the last line'", "the last line", "tail_sentence"),
    ("x\n" * 150, ("x\n" * 150)[-250:].strip(), "tail_truncation"),
    ("word " * 60 + ". " + "tail sentence here", "tail sentence here", "tail_sentence"),
])
def test_each_way_out_of_the_guard(raw: str, text: str, method: str) -> None:
    cleaned = clean_query(raw)
    assert (cleaned.text, cleaned.method) == (text, method)
    assert cleaned.changed is (method != "passthrough")


def test_a_cut_query_reports_how() -> None:
    cleaned = clean_query(PROMPT + "\nWhat did we file?")
    assert cleaned.report() == {"query_sanitized": True, "sanitizer": {
        "method": "question_extraction", "original_length": len(PROMPT) + 18,
        "clean_length": 17, "clean_query": "What did we file?"}}
