"""The single-writer lease: a real ``flock`` on the same file mempalace 3.11 uses.

``$HOME/.mempalace/locks/mine_palace_<sha256(realpath(palace))[:16]>.lock``; byte 0 is a sentinel,
then ``"<pid> <argv[0:3]>"`` names the holder. The file and its stale text outlive the holder; only
the kernel lock matters. Two fakes (or a fake and a real server) with the same HOME and palace
therefore contend exactly like two real servers.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING, unimported: pyproject.toml's helper-start contracts

if TYPE_CHECKING:  # imported where used: every fake starts with a lease, few take it
    from pathlib import Path


def config_dir(env: dict[str, str] | None = None) -> str:
    """mempalace 3.11's config dir, first match wins: ``MEMPALACE_CONFIG_DIR``; ``~/.mempalace``
    only when it is a real legacy install (``config.json``, ``people_map.json`` or
    ``palace/chroma.sqlite3`` in it); ``$XDG_CONFIG_HOME/mempalace`` (absolute only);
    ``~/.config/mempalace``."""
    env = dict(os.environ if env is None else env)
    home = env.get("HOME") or os.path.expanduser("~")
    chosen = (env.get("MEMPALACE_CONFIG_DIR") or "").strip()
    if chosen:
        return _expanded(chosen, home)
    legacy = os.path.join(home, ".mempalace")
    if any(os.path.isfile(os.path.join(legacy, *part)) for part in
           (("config.json",), ("people_map.json",), ("palace", "chroma.sqlite3"))):
        return legacy
    xdg = (env.get("XDG_CONFIG_HOME") or "").strip()
    if xdg and os.path.isabs(xdg):
        return os.path.join(xdg, "mempalace")
    return os.path.join(home, ".config", "mempalace")


def default_palace_path(env: dict[str, str] | None = None) -> str:
    """The palace a server started with no ``--palace`` uses, as mempalace 3.11 resolves it:
    the palace variables, then ``palace_path`` in the config dir's ``config.json``, then
    ``<config dir>/palace`` (``~/.config/mempalace/palace`` in a fresh HOME, not the legacy
    ``~/.mempalace/palace``: a lock on the one never blocks a server on the other)."""
    env = dict(os.environ if env is None else env)
    home = env.get("HOME") or os.path.expanduser("~")
    for name in ("MEMPALACE_PALACE_PATH", "MEMPALACE_PALACE", "MEMPAL_PALACE_PATH"):
        if env.get(name):
            return _expanded(env[name], home)
    directory = config_dir(env)
    try:
        with open(os.path.join(directory, "config.json"), encoding="utf-8") as handle:
            configured = json.load(handle).get("palace_path")
    except (OSError, ValueError, AttributeError):
        configured = None
    if isinstance(configured, str) and configured.strip():
        return _expanded(configured.strip(), home)
    return os.path.join(directory, "palace")


def _expanded(value: str, home: str) -> str:
    """``~`` is the given HOME (the bridge's, not this process's), then made absolute."""
    if value == "~" or value.startswith("~/"):
        value = home + value[1:]
    return os.path.abspath(value)


def lock_file_for(palace: str, home: str | None = None) -> Path:
    import hashlib
    from pathlib import Path

    home = home or os.environ.get("HOME") or os.path.expanduser("~")
    key = hashlib.sha256(os.path.normcase(os.path.realpath(palace)).encode()).hexdigest()[:16]
    return Path(home) / ".mempalace" / "locks" / f"mine_palace_{key}.lock"


def holder_message(palace: str, holder: str) -> str:
    return (f"palace {palace} is held by PID {holder}; wait for it to finish or stop the holder "
            "before retrying")


class Contention:
    """Why this process is not the writer: who holds the palace, in mempalace's words."""

    def __init__(self, palace: str, holder: str, kind: str = "peer_contention",
                 detail: str = "") -> None:
        self.palace = palace
        self.holder = holder  # "<pid> (<argv>)" or "another writer (identity not recorded)"
        self.kind = kind  # or "initialization_failed" (the lock could not be set up)
        self.detail = detail

    def __repr__(self) -> str:
        return f"Contention({self.palace!r}, {self.holder!r}, {self.kind!r})"

    @property
    def reason(self) -> str:
        if self.kind != "peer_contention":
            return self.detail
        return (f"another mempalace writer already holds the palace lock for '{self.palace}': "
                + holder_message(self.palace, self.holder))


class Lease:
    """Take-once, hold-until-exit writer lease; a loser retries on every lease-taking call."""

    def __init__(self, palace: str, home: str | None = None) -> None:
        self.palace = palace
        self._home = home
        self._path: Path | None = None
        self._fd: int | None = None

    @property
    def path(self) -> Path:
        """The lock file, worked out when first needed."""
        if self._path is None:
            self._path = lock_file_for(self.palace, self._home)
        return self._path

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> Contention | None:
        """Try to become the writer; None on success, else who holds the palace."""
        if self._fd is not None:
            return None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            return Contention(self.palace, "", "initialization_failed",
                              f"cannot open the palace lock {self.path}: {exc.strerror or exc}")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return Contention(self.palace, self.describe_holder())
        argv = " ".join([sys.executable if not sys.argv[0] else sys.argv[0], *sys.argv[1:3]])
        os.ftruncate(fd, 0)
        os.pwrite(fd, b"\x00" + f"{os.getpid()} {argv}".encode(), 0)
        self._fd = fd
        return None

    def describe_holder(self) -> str:
        try:
            body = self.path.read_bytes()[1:].decode(errors="replace").strip()
        except OSError:
            body = ""
        if not body:
            return "another writer (identity not recorded)"
        pid, _, argv = body.partition(" ")
        return f"{pid} ({argv})" if argv else pid

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
