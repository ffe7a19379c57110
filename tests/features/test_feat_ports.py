"""How a feature reads a tool result as failed (``features.ports.failed``): the reference's own
reading of mempalace's bodies, which the seed leaves open (docs/choices.md)."""

from __future__ import annotations

from typing import Any

import pytest

from palace_bridge.features.ports import failed

from .fakes import result


@pytest.mark.parametrize("payload", [
    {"success": False},
    {"success": False, "error": "mine failed: disk full"},
    {"error": "Chroma database missing"},
    {"error": "x", "success": None},
])
def test_a_failure_signal_in_the_body_is_a_failure(payload: dict[str, Any]) -> None:
    assert failed(result(payload))


def test_is_error_is_a_failure_whatever_the_body() -> None:
    assert failed(result({"success": True}, is_error=True))


@pytest.mark.parametrize("text", ["palace ok: 3 drawers", "[1, 2]", "null", ""])
def test_a_body_that_is_not_a_json_object_is_not_a_failure(text: str) -> None:
    """Only a failure signal counts: plain text or a JSON array is an answer, not a failure."""
    assert not failed(result(text))


def test_success_true_outweighs_an_error_field() -> None:
    assert not failed(result({"success": True, "error": "2 files skipped"}))
    assert not failed(result({"success": True, "source": "/tmp/x"}))


def test_success_is_read_as_a_json_boolean_only() -> None:
    """mempalace answers ``success`` as a boolean; a number there is not read as one."""
    assert not failed(result({"success": 0}))
    assert failed(result({"success": 1, "error": "x"}))
