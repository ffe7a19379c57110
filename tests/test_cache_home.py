"""One cache root for the whole kit (cache_home.py): the four caches under it agree on where it
is, an empty or relative ``XDG_CACHE_HOME`` included (the XDG spec calls both invalid)."""

from __future__ import annotations

import pwd
import sys
from pathlib import Path

import pytest

from palace_conformance import bytecode
from palace_conformance.cache_home import kit_cache_root
from palace_conformance.hosts import node
from palace_conformance.runner import last_failed
from palace_conformance.scenarios.cache import NO_CACHE_ENV, cache_dir


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for name in (NO_CACHE_ENV, last_failed.ENV_DIR, node.ENV_HOME, bytecode.ENV):
        monkeypatch.delenv(name, raising=False)
    return tmp_path / "home"


def four_places() -> list[Path]:
    """Where each of the kit's caches puts its own directory, each read back to the root."""
    root_of_bytecode = Path(bytecode.redirect() or "nowhere").parent
    scenarios = cache_dir()
    assert scenarios is not None
    return [root_of_bytecode, scenarios.parent,
            last_failed.record_path("b").parent.parent, node.node_home().parent.parent]


@pytest.mark.parametrize("value", ["", "relative/cache"])
def test_an_empty_or_relative_variable_means_the_home_cache_in_all_four(
        value: str, home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", value)
    expected = home / ".cache" / "palace-conformance"
    assert kit_cache_root() == expected
    expected.mkdir(parents=True)  # bytecode only moves into a cache that exists
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    monkeypatch.setattr(sys, "pycache_prefix", None)
    assert four_places() == [expected] * 4


def test_an_absolute_variable_is_the_base_of_all_four(
        tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    expected = tmp_path / "xdg" / "palace-conformance"
    assert kit_cache_root() == expected
    expected.mkdir(parents=True)
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    monkeypatch.setattr(sys, "pycache_prefix", None)
    assert four_places() == [expected] * 4


def test_no_home_and_no_variable_is_no_cache_not_a_traceback(
        home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No HOME and no password-database entry: ``~`` names no place (``Path.home()`` raises)."""
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.delenv("HOME", raising=False)

    def no_entry(uid: int) -> pwd.struct_passwd:
        raise KeyError(uid)

    monkeypatch.setattr(pwd, "getpwuid", no_entry)
    with pytest.raises(RuntimeError):
        Path.home()
    assert kit_cache_root() is None and cache_dir() is None
    with pytest.raises(last_failed.RunUsageError, match="XDG_CACHE_HOME"):
        last_failed.record_path("b")
    with pytest.raises(node.HostError, match="XDG_CACHE_HOME"):
        node.node_home()
