"""A TypeScript copy's ``node_modules`` (``npm ci`` from its lockfile), installed so that a kill
never leaves a half-written tree where a test or a tool would use it.

``npm ci`` runs in a staging directory beside the copy (its ``package.json`` and lockfile copied
there), under a file lock shared by parallel workers; the finished tree gets the lockfile's digest
as its marker and only then replaces ``node_modules`` by a rename. A run killed part-way (a test's
timeout on a loaded machine) leaves a staging directory, which the next install clears, and
either the old tree (whose marker no longer matches, so it is installed again) or none.
"""

from __future__ import annotations

import fcntl
import shutil
import subprocess
from pathlib import Path

STAGING = ".node_modules.staging"
RETIRED = ".node_modules.retired"
MARKER = ".lock-digest"
NPM_CI = ("ci", "--ignore-scripts", "--no-audit", "--no-fund")


def installed(copy: Path) -> bool:
    """Whether ``copy/node_modules`` is a finished install of the current lockfile."""
    marker = copy / "node_modules" / MARKER
    return marker.is_file() and marker.read_text() == (copy / "package-lock.json").read_text()


def install(copy: Path, *, npm: str, timeout: float = 900) -> Path:
    """``copy/node_modules``, installed from the lockfile unless a finished install is there."""
    with (copy / ".npm-ci.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if installed(copy):
            return copy / "node_modules"
        staging = copy / STAGING
        shutil.rmtree(staging, ignore_errors=True)  # a killed install's leftovers
        staging.mkdir()
        for name in ("package.json", "package-lock.json"):
            shutil.copy2(copy / name, staging / name)
        done = subprocess.run([npm, *NPM_CI], cwd=staging,
                              capture_output=True, text=True, timeout=timeout, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"npm ci in {copy.name} failed: {done.stderr[-2000:]}")
        (staging / "node_modules" / MARKER).write_text((copy / "package-lock.json").read_text())
        _swap(copy, staging / "node_modules")
        shutil.rmtree(staging, ignore_errors=True)
    return copy / "node_modules"


def _swap(copy: Path, fresh: Path) -> None:
    """Put ``fresh`` in place of ``copy/node_modules`` by renames (the old tree retired first)."""
    target = copy / "node_modules"
    retired = copy / RETIRED
    shutil.rmtree(retired, ignore_errors=True)
    if target.exists():
        target.rename(retired)
    fresh.rename(target)
    shutil.rmtree(retired, ignore_errors=True)
