"""``python -m palace_conformance.real.provision DIR``: make DIR a venv with the real mempalace.

Used by ``tox -e real-palace`` and ``.ci/run``. It does nothing when DIR already holds the pinned
release, so a second run costs a second, not the ~100 s and ~525 MB of a fresh install. It prints
the venv's Python, which is what ``--real-python`` and ``PALACE_REAL_PYTHON`` take.
"""

from __future__ import annotations

import contextlib
import fcntl
import subprocess
import sys
import time
import venv
from collections.abc import Iterator
from pathlib import Path

from palace_conformance.real.install import PINNED_VERSION, RealServerMissing, locate

INSTALL_TIMEOUT_S = 1200.0


@contextlib.contextmanager
def _locked(target: Path, timeout_s: float = INSTALL_TIMEOUT_S) -> Iterator[None]:
    """Hold ``TARGET.lock`` (flock), so two installers of one venv (``.ci/run``'s background
    install and this command) take turns instead of writing the same files at once."""
    lock_path = target.with_name(target.name + ".lock")
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with lock_path.open("a") as lock:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise RealServerMissing(f"{lock_path} stayed locked for {timeout_s:.0f} s: "
                                            "another install of the real server is stuck; "
                                            "stop it or delete the venv") from None
                time.sleep(0.5)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def provision(target: Path) -> Path:
    """The Python of a venv at ``target`` holding mempalace==PINNED_VERSION, installing it if
    needed; raises :class:`RealServerMissing` when the install fails."""
    with _locked(target):
        return _provision(target)


def _provision(target: Path) -> Path:
    python = target / "bin" / "python"
    try:
        return locate(str(python)).python
    except RealServerMissing:
        pass
    venv.EnvBuilder(with_pip=True, clear=False).create(target)
    command = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
               f"mempalace=={PINNED_VERSION}"]
    try:
        done = subprocess.run(command, timeout=INSTALL_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise RealServerMissing(f"installing mempalace=={PINNED_VERSION} into {target} took over "
                                f"{INSTALL_TIMEOUT_S:.0f} s: check the network to PyPI") from None
    if done.returncode != 0:
        raise RealServerMissing(f"pip could not install mempalace=={PINNED_VERSION} into {target} "
                                f"(exit {done.returncode}; its output is above)")
    return locate(str(python)).python


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m palace_conformance.real.provision DIR", file=sys.stderr)
        return 2
    try:
        print(provision(Path(args[0]).absolute()))
    except RealServerMissing as exc:
        print(f"palace-conformance: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
