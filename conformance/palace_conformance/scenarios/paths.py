"""The path policy: every file a fixture or a repro bundle names stays inside the run's directory.

Fixtures and bundles travel (other repositories, CI artifacts, issues), so their text is untrusted
data, and no path is ever built from it without being confined here:

* a path a fixture names (``helpers.feed.mine_source``) is written as ``${TMP}`` or
  ``${TMP}/a/relative/path``: the run's own directory or below it;
* a file name under such a path (``helpers.feed.files``) is relative, without ``.`` or ``..``
  segments;
* the feed helper's other output (``helpers.feed.stdout_before`` / ``stdout_after``) is lines
  that never name ``MINE_SOURCE=``: ``mine_source`` stays the one path a bridge is told to mine;
* a fixture's ``env`` (and a ``set_env`` step) never sets a variable the fake owns
  (``PALACE_FAKE_*``: its journal, state, plan, ...): the runner points those at the run's files;
* a variable saying where a palace, its config or its writer lock lives (``HOME``,
  ``XDG_CONFIG_HOME``, ``MEMPALACE_CONFIG_DIR``, ``MEMPALACE_PALACE_PATH``, ...) is written as
  ``${TMP}`` or below it, like any other path: the fake's lock and state follow it;
* a scenario id (which names a file when a bundle is replayed) has the schema's id form.

The loader checks the written form (the schema's patterns, then :func:`fixture_problems`, one line
per problem naming the field and the fix), and the runner checks again where it writes
(:func:`confine`: resolved, symlinks followed, then required to stay inside the directory), so a
fixture that slips past the loader, or a symlink made during the run, still cannot escape.

Standard library only: the runner's stand-ins import this on every helper run.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Mapping
from pathlib import Path

from palace_conformance.errors import UntrustedInputError
from palace_conformance.json_pointer import escape

TYPE_CHECKING = False  # typing.TYPE_CHECKING, unimported: pyproject.toml's helper-start contracts

if TYPE_CHECKING:
    from typing import Any

RUN_DIR = "${TMP}"
#: the prefix of every variable the fake reads for its own files and behaviour (fake/options.py)
FAKE_ENV_PREFIX = "PALACE_FAKE_"
#: the schema's scenario id form (fixtures/schema/scenario.schema.json, /properties/id/pattern)
SCENARIO_ID = re.compile(r"^[a-z0-9]+(\.[a-z0-9-]+)+$")
#: variables that place a palace, its config or its writer lock (fake/lease.py reads them as the
#: real server does): a fixture may set them, but only to the run's directory or below it
PLACE_VARIABLES = ("HOME", "XDG_CONFIG_HOME", "MEMPALACE_CONFIG_DIR", "MEMPALACE_PALACE_PATH",
                   "MEMPALACE_PALACE", "MEMPAL_PALACE_PATH")
_RUN_PATH_FIX = f'write it as {RUN_DIR}/NAME, e.g. "{RUN_DIR}/feed-export" (the run\'s directory)'
_NAME_FIX = 'name a file relative to mine_source, e.g. "session.jsonl" (no leading /, no ..)'
_LINE_FIX = "write one line of other output (a log line); the source is mine_source"
MINE_PREFIX = "MINE_SOURCE="


def stdout_line_problem(line: str) -> str | None:
    """Why ``line`` is not one line of the feed helper's other output (None when it is): it
    names ``MINE_SOURCE=`` (a second, unconfined source), or holds a line break (any that
    ``str.splitlines`` splits at, as a bridge reading the output may)."""
    if MINE_PREFIX in line:
        return f"names {MINE_PREFIX}"
    if "".join(line.splitlines()) != line:
        return "holds a line break"
    return None


class PathEscape(UntrustedInputError, ValueError):
    """A path that leads outside the directory it must stay in; ``str()`` is one line."""


#: what the runner keeps in a run's directory (runner/execution/world.py): the shims and
#: stand-ins on PATH, the fake's journal, plan and state, the stderr it reads as evidence, its
#: mark, and HOME (written through ``${HOME}`` only, under its own rule). No fixture or profile
#: file lands in or under one of these; tests/scenarios/test_run_area.py checks that every
#: entry a world makes is named here.
RESERVED_IN_RUN = ("bin", "home", "journal.jsonl", "faults.json", "palace-state.json",
                   "fake-stderr.txt", "host-stderr.txt", "fake-ready.json", ".pc-runner-pid")
#: what the runner and the programs it starts read from the run's HOME: the fake's writer lease
#: (fake/lease.py) and the places Python and Node load code from on their own
RESERVED_IN_HOME = (".mempalace/locks", ".local/lib", ".node_modules", ".node_libraries")
_SEGMENTS = re.compile(r"[/\\]")


def reserved_problem(relative: str, reserved: tuple[str, ...], *, file: bool = True) -> str | None:
    """Why ``relative`` (a path below a run's directory or HOME) is one the runner keeps for
    itself (None when it is not): in or under a ``reserved`` entry, or, for a file, the very
    path of a folder the runner needs. Compared without case (a case-insensitive disk)."""
    parts = [part.casefold() for part in _SEGMENTS.split(relative) if part not in ("", ".")]
    for entry in reserved:
        kept = entry.casefold().split("/")
        if parts[:len(kept)] == kept:
            return f"lands in {entry!r}, which the runner keeps for itself"
        if file and parts and parts == kept[:len(parts)]:
            return f"would stand where the runner's {entry!r} goes"
    return None


def _open_folders(root: str | Path, folders: list[str], what: str) -> int:
    """A descriptor of ``root/folders...``, each made when missing and opened with
    ``O_NOFOLLOW`` from the one before: a symlink anywhere on the way is refused."""
    import os

    directory = getattr(os, "O_DIRECTORY", 0)
    flags = os.O_RDONLY | directory | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(str(root), flags)
    try:
        for folder in folders:
            with contextlib.suppress(FileExistsError):
                os.mkdir(folder, 0o700, dir_fd=fd)
            try:
                inner = os.open(folder, flags | getattr(os, "O_NOFOLLOW", 0), dir_fd=fd)
            except OSError as exc:
                raise PathEscape(f"{what}: {folder!r} is not a plain folder ({exc.strerror}); "
                                 "no symlink or special file is followed") from None
            os.close(fd)
            fd = inner
    except BaseException:
        os.close(fd)
        raise
    return fd


def _checked_parts(relative: str, reserved: tuple[str, ...], file: bool, what: str) -> list[str]:
    why = name_problem(relative) or reserved_problem(relative, reserved, file=file)
    if why:
        raise PathEscape(f"{what} {why}; write it under a folder of its own in the run")
    return [part for part in _SEGMENTS.split(relative) if part]


def make_untrusted_folder(root: str | Path, relative: str,
                          reserved: tuple[str, ...] = RESERVED_IN_RUN) -> Path:
    """Make the folder ``root/relative`` for an untrusted writer, as :func:`write_untrusted`."""
    import os

    os.close(_open_folders(root, _checked_parts(relative, reserved, False,
                                                f"folder {relative!r}"), f"folder {relative!r}"))
    return Path(root) / relative


def write_untrusted(root: str | Path, relative: str, data: bytes, mode: int = 0o600,
                    reserved: tuple[str, ...] = RESERVED_IN_RUN) -> Path:
    """Write ``data`` to ``root/relative`` for an untrusted writer (a fixture's feed files, a
    profile's files): the path must be plain and outside ``reserved``, and no part of it may be
    a symlink, FIFO or device (each folder is opened with ``O_NOFOLLOW`` from ``root``, the file
    with ``O_NOFOLLOW | O_NONBLOCK`` and must be a regular file), so nothing outside the run
    or in the runner's own files is reached. :class:`PathEscape` otherwise, one line."""
    import os
    import stat

    what = f"file {relative!r}"
    *folders, name = _checked_parts(relative, reserved, True, what)
    fd = _open_folders(root, folders, what)
    try:
        try:
            out = os.open(name, os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
                          | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0), mode, dir_fd=fd)
        except OSError as exc:
            raise PathEscape(f"{what} cannot be written ({exc.strerror}); no symlink or "
                             "special file is followed") from None
        try:
            if not stat.S_ISREG(os.fstat(out).st_mode):
                raise PathEscape(f"{what} is not a regular file (a FIFO or device?); it is "
                                 "not written to")
            os.ftruncate(out, 0)
            os.fchmod(out, mode)
            view = memoryview(data)
            while view:
                view = view[os.write(out, view):]
        finally:
            os.close(out)
    finally:
        os.close(fd)
    return Path(root) / relative


def confine(root: str | Path, path: str | Path, what: str = "path") -> Path:
    """``path`` (relative to ``root``, or absolute) resolved, symlinks followed; it must be
    ``root`` or inside it, else :class:`PathEscape` naming ``what``."""
    base = Path(root).resolve()
    resolved = (base / path).resolve()
    if resolved != base and base not in resolved.parents:
        raise PathEscape(f"{what} {str(path)!r} leads outside {base} (to {resolved}); keep it "
                         "inside the run's directory")
    return resolved


def name_problem(name: str) -> str | None:
    """Why ``name`` is not a plain relative file name (None when it is)."""
    if not name:
        return "is empty"
    if name.startswith("/") or name.startswith("\\") or re.match(r"^[A-Za-z]:", name):
        return "is absolute"
    segments = re.split(r"[/\\]", name)
    if any(segment in ("", ".", "..") for segment in segments):
        return "has an empty, '.' or '..' segment"
    if "\0" in name:
        return "holds a NUL character"
    return None


def run_path_problem(value: str) -> str | None:
    """Why ``value`` (as written in a fixture) is not the run's directory or a path below it."""
    if value == RUN_DIR:
        return None
    if not value.startswith(RUN_DIR + "/"):
        return f"does not start with {RUN_DIR}/"
    rest = value[len(RUN_DIR) + 1:]
    if "${" in rest:
        return "has a placeholder after " + RUN_DIR
    why = name_problem(rest)
    return f"{why} after {RUN_DIR}/" if why else None


#: variables a profile knob may not map a scenario's value to (``knobs.*.env``): the ones the
#: kit, the fake or the runner set for a run (where the palace, its program, its URL and token
#: are; the host mark), and the ones that make a shell, Python, Node or the loader run other code
#: (fixtures/schema/bridge-profile.schema.json's knob pattern says the same)
RESERVED_ENV_NAMES = frozenset({
    *PLACE_VARIABLES, "PATH", "MEMPALACE_MCP_BIN", "MEMPALACE_FEED_BIN", "MEMPALACE_REMOTE_URL",
    "MEMPALACE_REMOTE_TOKEN", "SHELL", "BASH_ENV", "ENV", "IFS", "TMPDIR", "PWD", "CDPATH",
    "PERL5OPT", "PERL5LIB", "RUBYOPT", "RUBYLIB"})
RESERVED_ENV_PREFIXES = ("PALACE_FAKE_", "PALACE_CONFORMANCE_", "LD_", "DYLD_", "PYTHON",
                         "NODE_", "NPM_CONFIG_", "GIT_")
_ENV_FIX = ("map it to the bridge's own variable (e.g. PI_PALACE_TIMEOUT_MS), not one the kit, "
            "the fake or a program loader reads")


def reserved_env_problem(name: str) -> str | None:
    """Why a profile may not map a value to variable ``name`` (None when it may)."""
    if name in RESERVED_ENV_NAMES:
        return f"{name} is a variable the runner sets or a program loader reads; {_ENV_FIX}"
    for prefix in RESERVED_ENV_PREFIXES:
        if name.upper().startswith(prefix):
            return f"{name} starts with {prefix}, kept for the kit or a program loader; {_ENV_FIX}"
    return None


def fake_owned(name: str) -> bool:
    """A variable the fake reads for its own files and behaviour, which only the runner sets."""
    return name.startswith(FAKE_ENV_PREFIX)


Found = Iterator[tuple[str, str, str]]  # (pointer, problem, fix), as the loader's rules yield


def fixture_problems(data: Mapping[str, Any]) -> Found:
    """Every path or variable of a fixture that this policy refuses."""
    feed = (data.get("helpers") or {}).get("feed") or {}
    source = feed.get("mine_source")
    below = ""  # mine_source below the run's directory, when it is a plain path there
    if isinstance(source, str):
        why = run_path_problem(source)
        if why:
            yield ("/helpers/feed/mine_source", f"mine_source {source!r} {why}: it must stay "
                   "inside the run's directory", _RUN_PATH_FIX)
        elif source == RUN_DIR:
            yield ("/helpers/feed/mine_source", f"mine_source {source!r} is the run's directory "
                   "itself, which holds the runner's own files", _RUN_PATH_FIX)
        else:
            below = source[len(RUN_DIR) + 1:]
            why = reserved_problem(below, RESERVED_IN_RUN, file=False)
            if why:
                yield ("/helpers/feed/mine_source", f"mine_source {source!r} {why}",
                       _RUN_PATH_FIX)
                below = ""
    for name in feed.get("files") or {}:
        why = name_problem(name)
        if not why and below:
            why = reserved_problem(f"{below}/{name}", RESERVED_IN_RUN)
        if why:
            yield (f"/helpers/feed/files/{escape(name)}", f"file name {name!r} {why}", _NAME_FIX)
    for key in ("stdout_before", "stdout_after"):
        lines = feed.get(key)
        for index, line in enumerate(lines if isinstance(lines, list) else ()):
            why = stdout_line_problem(line) if isinstance(line, str) else None
            if why:
                yield (f"/helpers/feed/{key}/{index}", f"stdout line {line!r} {why}", _LINE_FIX)
    owners = [("/env", data.get("env") or {})]
    owners += [(f"/steps/{index}/env", step.get("env") or {})
               for index, step in enumerate(data.get("steps") or ())
               if isinstance(step, Mapping) and step.get("op") == "set_env"]
    for at, env in owners:
        for name, value in env.items():
            if name in PLACE_VARIABLES and isinstance(value, str):
                why = run_path_problem(value)
                if why:
                    yield (f"{at}/{escape(name)}", f"{name} {value!r} {why}: where a palace "
                           "lives must stay inside the run's directory", _RUN_PATH_FIX)
            if fake_owned(name):
                yield (f"{at}/{escape(name)}", f"{name} is the fake's own variable (the runner "
                       "points it at this run's files)", f"remove it: a fixture may not set "
                       f"{FAKE_ENV_PREFIX}* variables")


def check_fixture(data: Mapping[str, Any]) -> None:
    """The run-time check of :func:`fixture_problems`: :class:`PathEscape` on the first one."""
    for where, problem, fix in fixture_problems(data):
        raise PathEscape(f"{where}: {problem} ({fix})")
