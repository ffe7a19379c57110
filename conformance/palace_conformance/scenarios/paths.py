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

import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from palace_conformance.errors import UntrustedInputError
from palace_conformance.json_pointer import escape

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


def fake_owned(name: str) -> bool:
    """A variable the fake reads for its own files and behaviour, which only the runner sets."""
    return name.startswith(FAKE_ENV_PREFIX)


Found = Iterator[tuple[str, str, str]]  # (pointer, problem, fix), as the loader's rules yield


def fixture_problems(data: Mapping[str, Any]) -> Found:
    """Every path or variable of a fixture that this policy refuses."""
    feed = (data.get("helpers") or {}).get("feed") or {}
    source = feed.get("mine_source")
    if isinstance(source, str):
        why = run_path_problem(source)
        if why:
            yield ("/helpers/feed/mine_source", f"mine_source {source!r} {why}: it must stay "
                   "inside the run's directory", _RUN_PATH_FIX)
    for name in feed.get("files") or {}:
        why = name_problem(name)
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
