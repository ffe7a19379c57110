"""Provisioning the real server's venv: a venv that already has it is reused, and two installers
of one venv take turns (``.ci/run`` installs in the background while tox may ask for it)."""

from __future__ import annotations

import fcntl
from pathlib import Path

import pytest

from palace_conformance.real import provision as prov
from palace_conformance.real.install import PINNED_VERSION, RealServerMissing


def _ready_venv(target: Path) -> Path:
    """A stand-in venv whose Python says it has the pinned mempalace (no 525 MB install)."""
    bin_dir = target / "bin"
    bin_dir.mkdir(parents=True)
    python = bin_dir / "python"
    python.write_text(f"#!/bin/sh\necho {PINNED_VERSION}\n")
    python.chmod(0o755)
    (bin_dir / "mempalace-mcp").write_text("#!/bin/sh\n")
    return python


def test_a_venv_that_has_it_is_reused_without_installing(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    python = _ready_venv(tmp_path / "venv")
    monkeypatch.setattr("venv.EnvBuilder", _never)
    assert prov.provision(tmp_path / "venv") == python.absolute()


def test_it_waits_for_another_installer_and_gives_up_in_one_line(tmp_path: Path) -> None:
    target = tmp_path / "venv"
    with (tmp_path / "venv.lock").open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        with pytest.raises(RealServerMissing) as exc, prov._locked(target, timeout_s=1.0):
            pass
    assert "stayed locked" in str(exc.value) and "\n" not in str(exc.value)
    with prov._locked(target, timeout_s=1.0):  # released: taken at once
        pass


def test_the_command_prints_the_python_or_one_line(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    python = _ready_venv(tmp_path / "venv")
    assert prov.main([str(tmp_path / "venv")]) == 0
    assert capsys.readouterr().out.strip() == str(python.absolute())
    assert prov.main([]) == 2
    assert "usage:" in capsys.readouterr().err


def _never(*args: object, **kwargs: object) -> None:
    raise AssertionError("a venv that has the pinned release must not be reinstalled")
