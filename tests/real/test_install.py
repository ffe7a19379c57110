"""Finding the real server: every way it can be missing gets one line naming the fix."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from palace_conformance.real.install import (
    ENV_PYTHON,
    PINNED_VERSION,
    RealServerMissing,
    isolated_environment,
    locate,
)


def _script(tmp_path: Path, body: str, name: str = "python") -> Path:
    path = tmp_path / "venv" / "bin" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


def _one_line(exc: pytest.ExceptionInfo[RealServerMissing]) -> str:
    text = str(exc.value)
    assert "\n" not in text
    return text


def test_nothing_named_says_how_to_name_it() -> None:
    with pytest.raises(RealServerMissing) as exc:
        locate(None, env={})
    assert "--real-python" in _one_line(exc) and "tox -e real-palace" in _one_line(exc)


def test_the_environment_variable_names_it(tmp_path: Path) -> None:
    with pytest.raises(RealServerMissing) as exc:
        locate(None, env={ENV_PYTHON: str(tmp_path / "nope")})
    assert "is not an executable Python" in _one_line(exc)


def test_a_python_without_mempalace(tmp_path: Path) -> None:
    python = _script(tmp_path, "exit 1")
    with pytest.raises(RealServerMissing) as exc:
        locate(str(python))
    assert "has no mempalace installed" in _one_line(exc)


def test_another_release_is_refused_unless_allowed(tmp_path: Path) -> None:
    python = _script(tmp_path, "echo 3.12.0")
    _script(tmp_path, "exit 0", name="mempalace-mcp")
    with pytest.raises(RealServerMissing) as exc:
        locate(str(python))
    assert f"install mempalace=={PINNED_VERSION}" in _one_line(exc)
    found = locate(str(python), allow_other_version=True)
    assert found.version == "3.12.0"
    assert found.stdio_command() == [str(found.bin_dir / "mempalace-mcp")]


def test_the_entry_point_must_sit_beside_the_python(tmp_path: Path) -> None:
    python = _script(tmp_path, f"echo {PINNED_VERSION}")
    with pytest.raises(RealServerMissing) as exc:
        locate(str(python))
    assert "no mempalace-mcp beside it" in _one_line(exc)


def test_isolation_drops_every_inherited_palace_variable(tmp_path: Path) -> None:
    base = {"PATH": os.defpath, "MEMPALACE_PALACE_PATH": "/home/me/.mempalace/palace",
            "MEMPALACE_MCP_HTTP_TOKEN": "secret", "XDG_CONFIG_HOME": "/home/me/.config"}
    env = isolated_environment(tmp_path, tmp_path / "palace", {"X": "1"}, base=base)
    assert env["MEMPALACE_PALACE_PATH"] == str(tmp_path / "palace")
    assert "MEMPALACE_MCP_HTTP_TOKEN" not in env
    assert env["HOME"] == str(tmp_path) and env["XDG_CONFIG_HOME"] == str(tmp_path / ".config")
    assert env["MEMPALACE_HUB_FORWARD"] == "0" and env["X"] == "1"


@pytest.mark.real_palace
def test_the_installed_real_server_is_found() -> None:
    found = locate()
    assert found.version == PINNED_VERSION
    assert (found.bin_dir / "mempalace-mcp").is_file()
