"""Issue 13: no ``--fault`` spec crashes the parser. Whatever the string, ``parse_compact`` gives a
valid :class:`Fault` or refuses it with one :class:`FaultPlanError` line, and the command line
turns a refusal into exit 2 and that one line."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from palace_conformance.fake.faults import Fault, FaultPlanError, parse_compact

from .stdio_harness import run_cli

#: pieces of the compact syntax, so generated strings reach past the first refusal
PIECES = st.sampled_from([
    "@", "#", "x", "*", ",", "=", "[", "]", "{", "}", '"', "0", "1", "9", "-", ".", " ", "²",
    "\u0661", "stall", "error", "delay", "exit", "result", "notify", "garbage", "ms", "code",
    "message", "when", "method", "ping", "tools/call", "mempalace_search", "$startup", "1e400",
    "9" * 4400, "[" * 1000,  # past int()'s digit limit, past the JSON decoder's recursion limit
])
SPECS = st.one_of(st.text(max_size=60), st.lists(PIECES, max_size=14).map("".join))


def assert_parses_or_refuses(spec: str) -> None:
    try:
        fault = parse_compact(spec)
    except FaultPlanError as refusal:
        message = str(refusal)
        assert message.startswith("--fault ") and "\n" not in message, message
    else:
        assert isinstance(fault, Fault)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(SPECS)
def test_any_string_parses_or_is_refused_in_one_line(spec: str) -> None:
    assert_parses_or_refuses(spec)


@pytest.mark.parametrize("spec", [
    "result@ping,result=" + "[" * 5000,  # json.loads: RecursionError
    "result@ping,result=" + "[" * 5000 + "]" * 5000,
    "stall,ms=" + "9" * 5000,  # int(): past the interpreter's digit limit
    "stall#" + "9" * 5000,
    "stallx" + "9" * 5000,
    "stall#²",  # a digit to str.isdigit, not to int()
    "stallx²",
])
def test_specs_that_used_to_crash_are_refused(spec: str) -> None:
    with pytest.raises(FaultPlanError) as caught:
        parse_compact(spec)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("spec", ["stall#\u0661", "stallx\u0661"])
def test_only_ascii_digits_count(spec: str) -> None:
    """An Arabic-Indic one was taken for 1; a count is written in ASCII digits."""
    with pytest.raises(FaultPlanError):
        parse_compact(spec)


@pytest.mark.parametrize("spec", ["GARBAGE", "stall,ms=" + "9" * 5000,
                                  "result@ping,result=" + "[" * 5000])
def test_the_cli_refuses_a_bad_fault_with_exit_2_and_one_line(tmp_path: Path, spec: str) -> None:
    done = run_cli(["fake", "stdio", "--fault", spec], tmp_path)
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "Traceback" not in done.stderr
