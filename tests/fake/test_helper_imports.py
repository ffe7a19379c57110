"""The helpers a bridge starts (the stdio fake, the fake CLI, the feed stand-in) leave pathlib
unimported until a path needs it: it is about 5 ms of every start, and a catalogue run starts
hundreds of them. The fake's stand-in for ``Path(x).name`` answers as pathlib does."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path, PurePosixPath

import pytest
from hypothesis import given
from hypothesis import strategies as st

from palace_conformance.fake.palace import _name_of

KIT = str(Path(__file__).resolve().parents[2] / "conformance")


@pytest.mark.parametrize("module", ["palace_conformance.fake.cli",
                                    "palace_conformance.fake.mempalace_cli",
                                    "palace_conformance.standins.feed_session"])
def test_a_helper_imports_no_pathlib_at_start(module: str) -> None:
    probe = f"import sys, {module}; print('pathlib' in sys.modules)"
    env = {**os.environ, "PYTHONPATH": KIT}
    done = subprocess.run([sys.executable, "-S", "-c", probe], capture_output=True, text=True,
                          env=env, timeout=60, check=True)
    assert done.stdout.strip() == "False"


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
