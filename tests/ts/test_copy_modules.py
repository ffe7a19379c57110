"""A copy's ``node_modules`` install (``copy_modules.py``): a kill part-way never leaves a
half-written tree in place, and the next install clears what it left.

``npm`` is played by small shell scripts (the install logic, not npm, is under test), run and
killed as real processes."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from .copy_modules import MARKER, STAGING, install, installed

LOCK = '{"name": "c", "lockfileVersion": 3, "packages": {}}\n'


def _copy(root: Path) -> Path:
    copy = root / "copy"
    copy.mkdir()
    (copy / "package.json").write_text('{"name": "c", "private": true}\n')
    (copy / "package-lock.json").write_text(LOCK)
    return copy


def _npm(root: Path, body: str) -> str:
    script = root / "fake-npm"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)
    return str(script)


def test_a_killed_install_leaves_the_finished_tree_in_place(tmp_path: Path) -> None:
    copy = _copy(tmp_path)
    first = "mkdir -p node_modules/first && touch node_modules/first/done"
    install(copy, npm=_npm(tmp_path, first))
    assert installed(copy) and (copy / "node_modules" / "first" / "done").exists()
    # the lockfile changes; the next install is killed by its timeout half-way through writing
    (copy / "package-lock.json").write_text(LOCK.replace('"c"', '"c2"'))
    slow = _npm(tmp_path, "mkdir -p node_modules/second && touch node_modules/second/half"
                          " && exec sleep 30")
    with pytest.raises(subprocess.TimeoutExpired):
        install(copy, npm=slow, timeout=1)
    # the half-written tree is in the staging directory, never in node_modules
    assert (copy / STAGING / "node_modules" / "second" / "half").exists()
    assert not (copy / "node_modules" / "second").exists()
    assert (copy / "node_modules" / "first" / "done").exists()
    assert not installed(copy)  # the old tree's marker names the old lockfile: it is not used


def test_the_next_install_clears_the_leftovers_and_marks_the_tree(tmp_path: Path) -> None:
    copy = _copy(tmp_path)
    (copy / STAGING / "node_modules" / "junk").mkdir(parents=True)  # a killed install's leftovers
    (copy / "node_modules" / "half").mkdir(parents=True)  # an unmarked tree (an old npm ci killed)
    install(copy, npm=_npm(tmp_path, "mkdir -p node_modules/pkg"
                                     " && touch node_modules/pkg/index.js"))
    assert installed(copy)
    assert (copy / "node_modules" / MARKER).read_text() == LOCK
    assert (copy / "node_modules" / "pkg" / "index.js").exists()
    assert not (copy / "node_modules" / "half").exists()
    assert not (copy / STAGING).exists()


def test_a_failed_install_says_so_and_keeps_node_modules(tmp_path: Path) -> None:
    copy = _copy(tmp_path)
    (copy / "node_modules" / "kept").mkdir(parents=True)
    with pytest.raises(RuntimeError, match="npm ci in copy failed: no registry"):
        install(copy, npm=_npm(tmp_path, "echo 'no registry' >&2; exit 1"))
    assert (copy / "node_modules" / "kept").exists()
