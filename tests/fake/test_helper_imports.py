"""The helpers a bridge starts (the stdio fake, the fake CLI, the feed stand-ins) leave pathlib,
typing, hashlib and datetime unimported until they are needed: together about 15 ms of every
start, and a catalogue run starts hundreds of them (the runner's stand-ins, which confine paths
with pathlib, import it). The fake's stand-in for ``Path(x).name`` answers as pathlib does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path, PurePosixPath

import pytest
from hypothesis import given
from hypothesis import strategies as st

from palace_conformance.fake.palace import _name_of

KIT = str(Path(__file__).resolve().parents[2] / "conformance")


LATE = ("typing", "hashlib", "datetime")  # imported where used, by every helper


@pytest.mark.parametrize(("module", "late"), [
    ("palace_conformance.fake.cli", ("pathlib", *LATE)),
    ("palace_conformance.fake.mempalace_cli", ("pathlib", *LATE)),
    ("palace_conformance.standins.feed_session", ("pathlib", *LATE)),
    ("palace_conformance.standins.scripted", LATE),
])
def test_a_helper_imports_none_of_the_late_modules_at_start(module: str,
                                                             late: tuple[str, ...]) -> None:
    probe = f"import sys, {module}; print(sorted(set({list(late)!r}) & set(sys.modules)))"
    env = {**os.environ, "PYTHONPATH": KIT}
    done = subprocess.run([sys.executable, "-S", "-c", probe], capture_output=True, text=True,
                          env=env, timeout=60, check=True)
    assert done.stdout.strip() == "[]"


@given(st.text(alphabet=st.sampled_from(["/", ".", "a", "b", " ", "é"]), max_size=12))
def test_the_name_of_a_path_is_pathlibs(text: str) -> None:
    assert _name_of(text) == PurePosixPath(text).name


@pytest.mark.parametrize("value", [5, None, 1.5, ["x"]])
def test_a_name_of_a_non_string_fails_as_pathlib_does(value: object) -> None:
    with pytest.raises(TypeError) as ours:
        _name_of(value)  # type: ignore[arg-type]
    with pytest.raises(TypeError) as theirs:
        PurePosixPath(value)  # type: ignore[arg-type]
    assert str(ours.value) == str(theirs.value)


def test_the_stdio_fake_serves_a_handshake_and_a_listing_without_the_late_modules(
        tmp_path: Path) -> None:
    """What a stdio fake imports while it serves the commonest session (an ``initialize`` and a
    ``tools/list``, a fresh palace in its HOME), not only at import: none of them either."""
    report = ("import atexit, sys\n"
              f"atexit.register(lambda: print(sorted(set({list(('pathlib', *LATE))!r}) "
              "& set(sys.modules)), file=sys.stderr))\n"
              "from palace_conformance.fake.cli import fake_mcp_main\n"
              "sys.argv = ['mempalace-mcp']\nfake_mcp_main()\n")
    session = "".join(json.dumps(message) + "\n" for message in (
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "test", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path), "PYTHONPATH": KIT}
    done = subprocess.run([sys.executable, "-S", "-c", report], input=session,
                          capture_output=True, text=True, env=env, timeout=60, check=False)
    assert [json.loads(line)["id"] for line in done.stdout.splitlines()] == [1, 2]
    assert done.stderr.strip().splitlines()[-1] == "[]"
