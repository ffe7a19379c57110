"""Where a server started without ``--palace`` keeps its palace, as mempalace 3.11 resolves it
(research: mempalace-3.11-semantics.md §2, read off the real server): a fake ``hold-lock`` and a
real server must resolve the same path, or lock reproduction silently does nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from palace_conformance.fake.lease import config_dir, default_palace_path, lock_file_for


def env(home: Path, **extra: str) -> dict[str, str]:
    return {"HOME": str(home), **extra}


def test_a_fresh_home_uses_the_xdg_palace(tmp_path: Path) -> None:
    assert default_palace_path(env(tmp_path)) == str(tmp_path / ".config/mempalace/palace")


@pytest.mark.parametrize("marker", ["config.json", "people_map.json", "palace/chroma.sqlite3"])
def test_only_a_real_legacy_install_keeps_the_old_place(tmp_path: Path, marker: str) -> None:
    (tmp_path / ".mempalace" / marker).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / ".mempalace" / marker).write_text("{}")
    assert default_palace_path(env(tmp_path)) == str(tmp_path / ".mempalace/palace")


def test_the_servers_own_locks_and_server_dirs_do_not_make_a_legacy_install(
        tmp_path: Path) -> None:
    (tmp_path / ".mempalace" / "locks").mkdir(parents=True)
    (tmp_path / ".mempalace" / "server").mkdir()
    assert config_dir(env(tmp_path)) == str(tmp_path / ".config/mempalace")


def test_xdg_config_home_counts_only_when_absolute(tmp_path: Path) -> None:
    xdg = tmp_path / "xdg"
    assert config_dir(env(tmp_path, XDG_CONFIG_HOME=str(xdg))) == str(xdg / "mempalace")
    assert config_dir(env(tmp_path, XDG_CONFIG_HOME="relative/xdg")) == str(
        tmp_path / ".config/mempalace")


def test_the_config_dir_variable_and_the_palace_variables_come_first(tmp_path: Path) -> None:
    chosen = tmp_path / "cfg"
    assert default_palace_path(env(tmp_path, MEMPALACE_CONFIG_DIR=str(chosen),
                                   XDG_CONFIG_HOME=str(tmp_path / "x"))) == str(chosen / "palace")
    assert default_palace_path(env(tmp_path, MEMPALACE_CONFIG_DIR="~/cfg")) == str(
        tmp_path / "cfg" / "palace")
    assert default_palace_path(env(tmp_path, MEMPALACE_PALACE_PATH="~/p",
                                   MEMPALACE_CONFIG_DIR=str(chosen))) == str(tmp_path / "p")


def test_palace_path_in_the_config_file(tmp_path: Path) -> None:
    directory = tmp_path / ".config" / "mempalace"
    directory.mkdir(parents=True)
    (directory / "config.json").write_text(json.dumps({"palace_path": "~/elsewhere"}))
    assert default_palace_path(env(tmp_path)) == str(tmp_path / "elsewhere")


def test_the_lock_stays_under_home_wherever_the_palace_is(tmp_path: Path) -> None:
    palace = default_palace_path(env(tmp_path))
    lock = lock_file_for(palace, str(tmp_path))
    assert lock.parent == tmp_path / ".mempalace" / "locks"
