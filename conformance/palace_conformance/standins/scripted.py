"""The helper programs the runner puts on a bridge's PATH next to the fake ``mempalace-mcp``.

fixtures/README.md promises that every run of ``mempalace-pi-session`` (the transcript exporter
a feeding bridge runs) and of ``mempalace`` (the CLI a bridge must never run) is journaled as
``{"kind": "helper_run", "name", "argv"}``. The fake's own shims journal other kinds
(``feed_prepare``, ``cli_run``), so the runner writes into its shim directory (made by
``fake.shims.install_shim``), over the fake's shims of the same name:

* ``mempalace-pi-session`` behaves as the scenario's ``helpers.feed`` says: forks a child of
  its own first with ``fork`` (journaled as ``descendant_start``), waits ``delay_ms``,
  exits ``exit_code`` when it is non-zero, else creates ``files`` under ``mine_source``, prints
  the ``stdout_before`` lines, ``MINE_SOURCE=<mine_source>`` (nothing when ``mine_source`` is
  null) and the ``stdout_after`` lines, then exits 0, or with ``kill_signal`` kills itself with
  that signal (a prepare that printed its source and then died);
* ``mempalace`` journals the run, then behaves like the fake CLI (which adds a ``cli_run`` record),
  and so does ``python -m mempalace``: the fake package finds the configuration file,
  ``.standins.json``, in the shim directory it was installed for.

The journal path and behaviour are in the configuration file, found from the scripts' own
location, so a bridge that scrubs its helpers' environment is still journaled. This module is
imported on every helper run: standard library, the journal module, the path policy
(``scenarios.paths``, which confines what the feed helper writes to the run's directory) and
``processes`` (the host mark's name) only.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

TYPE_CHECKING = False  # typing.TYPE_CHECKING, unimported: pyproject.toml's helper-start contracts

if TYPE_CHECKING:
    from typing import Any

FEED_HELPER = "mempalace-pi-session"
CLI_HELPER = "mempalace"
RECORD_KIND = "helper_run"
CONFIG_NAME = ".standins.json"
KILL_SIGNALS = ("SIGTERM", "SIGKILL", "SIGINT", "SIGHUP")  # helpers.feed.kill_signal
FORK_CHILD_MS = 60000  # helpers.feed.fork.child_ms: how long a forked child lives by default
_SECRET_WORDS = ("TOKEN", "SECRET", "PASSWORD", "KEY")


def install(directory: Path, config: Mapping[str, Any]) -> list[Path]:
    """Write the configuration and both stand-ins into ``directory``, over the fake's shims of
    the same name (after ``install_shim``, their shebang is the shim directory's Python).
    Returns the files written."""
    from palace_conformance.bytecode import script_prelude
    from palace_conformance.fake.shims import shim_python, write_script

    directory.mkdir(parents=True, exist_ok=True)
    config_path = directory / CONFIG_NAME
    config_path.write_text(json.dumps(dict(config)), encoding="utf-8")
    kit_root = str(Path(__file__).resolve().parent.parent.parent)
    python = shim_python(directory)
    written = [config_path]
    for name, call in ((FEED_HELPER, f"main({FEED_HELPER!r}, {str(config_path)!r})"),
                       (CLI_HELPER, f"run_cli({str(config_path)!r})")):
        path = directory / name
        write_script(path, python,
                     f"palace-conformance runner stand-in for {name}: journals every run",
                     f"{script_prelude()}import sys\n\nsys.path[:0] = [{kit_root!r}]\n"
                     f"from palace_conformance.standins.scripted import {call.split('(')[0]}\n\n"
                     f"{call}\n")
        written.append(path)
    return written


def config_in(shim_dir: str | os.PathLike[str] | None) -> Path | None:
    """The runner's stand-in configuration in ``shim_dir``, if the runner wrote one there."""
    if not shim_dir:
        return None
    path = Path(shim_dir) / CONFIG_NAME
    return path if path.is_file() else None


def _env_subset(env: Mapping[str, str]) -> dict[str, str]:
    """As feed_session's: the runner's host mark is left out (its bookkeeping, not the bridge's)."""
    from palace_conformance.processes import HOST_MARK  # standard library only

    out = {}
    for key, value in sorted(env.items()):
        if key == HOST_MARK:
            continue
        if key.startswith(("MEMPALACE_", "PALACE_")) or key == "HOME":
            out[key] = "<redacted>" if any(w in key for w in _SECRET_WORDS) else value
    return out


def _journal(path: str | None, name: str, argv: Sequence[str]) -> None:
    if not path:
        return
    from palace_conformance.fake.journal import Journal

    journal = Journal(path, "helper")
    try:
        journal.record(RECORD_KIND, name=name, argv=list(argv), cwd=os.getcwd(),
                       env=_env_subset(os.environ))
    finally:
        journal.close()


def _lines(feed: Mapping[str, Any], key: str) -> list[str]:
    """``stdout_before`` / ``stdout_after``: other output, one line each; the path policy's
    rule again where it is printed (``mine_source`` is the one source a bridge is told)."""
    from palace_conformance.scenarios.paths import stdout_line_problem

    lines = [str(line) for line in feed.get(key) or ()]
    for line in lines:
        why = stdout_line_problem(line)
        if why:
            raise ValueError(f"helpers.feed.{key} line {line!r} {why}")
    return lines


def _stage(source: str, files: Mapping[str, Any], root: str | None) -> None:
    """Make ``source`` and write ``files`` under it. With ``root`` (a runner's world) both go
    through the path policy's untrusted writer: below the run's directory, never in the
    runner's own entries (its ``bin/`` of shims and stand-ins, journal, state, HOME's lease),
    no symlink, FIFO or device followed."""
    from palace_conformance.scenarios.paths import (
        PathEscape,
        make_untrusted_folder,
        write_untrusted,
    )

    if not root:
        target = Path(source)
        target.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            (target / name).write_text(str(text), encoding="utf-8")
        return
    base = Path(root)
    try:
        relative = Path(source).relative_to(base).as_posix()
    except ValueError:
        raise PathEscape(f"mine_source {source!r} is not below the run's directory {root}; "
                         "keep it inside the run") from None
    if relative in ("", "."):
        raise PathEscape(f"mine_source {source!r} is the run's directory itself; name a "
                         "folder below it")
    make_untrusted_folder(base, relative)
    for name, text in files.items():
        write_untrusted(base, f"{relative}/{name}", str(text).encode("utf-8"))


def _fork_child(fork: Mapping[str, Any], journal: str | None) -> None:
    """``helpers.feed.fork``: start a child of the helper's own (an rsync, a worker) in the
    helper's process group, which journals ``descendant_start`` and lives ``child_ms``; with
    ``hold_stdout`` (the default, as a child that inherits them) it keeps the helper's stdout
    and stderr open until it ends. The fake's grandchild (``fake.grandchild``) does the work."""
    if not journal:
        return
    from palace_conformance.fake.grandchild import spawn_grandchild
    from palace_conformance.fake.journal import Journal

    own = Journal(journal, "helper")
    try:
        spawn_grandchild(own, int(fork.get("child_ms", FORK_CHILD_MS)),
                         hold_pipes=bool(fork.get("hold_stdout", True)))
    finally:
        own.close()


def run_feed(feed: Mapping[str, Any], root: str | None = None,
             journal: str | None = None) -> int:
    """``helpers.feed``: fork a child (``fork``), delay, fail, or stage the files and print
    ``MINE_SOURCE=<path>`` between the other output lines; then exit 0, or die by
    ``kill_signal``.

    With ``root`` (the run's directory, from the runner's configuration), every file is
    confined to it as it is written (the path policy, ``scenarios.paths``), symlinks included.
    ``journal``: where a forked child journals its start."""
    fork = feed.get("fork")
    if isinstance(fork, Mapping):
        _fork_child(fork, journal)
    delay_ms = int(feed.get("delay_ms") or 0)
    if delay_ms:
        time.sleep(delay_ms / 1000)
    exit_code = int(feed.get("exit_code") or 0)
    if exit_code:
        print(f"{FEED_HELPER}: scripted failure (exit {exit_code})", file=sys.stderr)
        return exit_code
    kill = feed.get("kill_signal")
    try:
        before, after = _lines(feed, "stdout_before"), _lines(feed, "stdout_after")
        if kill is not None and kill not in KILL_SIGNALS:
            raise ValueError(f"helpers.feed.kill_signal {kill!r} is not one of "
                             f"{', '.join(KILL_SIGNALS)}")
    except ValueError as exc:
        print(f"{FEED_HELPER} (palace-conformance stand-in): refused: {exc}", file=sys.stderr)
        return 2
    for line in before:
        print(line)
    source = feed.get("mine_source")
    if source:
        from palace_conformance.scenarios.paths import PathEscape

        try:
            _stage(str(source), feed.get("files") or {}, root)
        except PathEscape as exc:
            print(f"{FEED_HELPER} (palace-conformance stand-in): refused: {exc}", file=sys.stderr)
            return 2
        print(f"MINE_SOURCE={source}")
    for line in after:
        print(line)
    sys.stdout.flush()
    if kill is not None:
        number = getattr(signal, str(kill))
        if number != signal.SIGKILL:  # die by it, whatever Python installed for it
            signal.signal(number, signal.SIG_DFL)
        os.kill(os.getpid(), number)
        signal.pause()  # not reached: the default action of each is to end the process
    return 0


def main(name: str, config_path: str, argv: Sequence[str] | None = None) -> None:
    """Journal one run of helper ``name`` (``argv[0]`` is how it was invoked; default
    ``sys.argv``). The feed helper then does what ``helpers.feed`` says and exits; for the CLI
    this returns, with the journal path put in the environment for the fake CLI to use
    (:func:`run_cli` does both)."""
    argv = list(sys.argv if argv is None else argv) or [name]
    from palace_conformance.fake.shims import apply_world  # the run's settings, beside config

    apply_world(Path(config_path).parent)
    try:
        config = json.loads(Path(config_path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        print(f"{name} (palace-conformance stand-in): cannot read {config_path}: {exc}",
              file=sys.stderr)
        sys.exit(2)
    journal = config.get("journal")
    _journal(journal, name, argv)
    if name == FEED_HELPER:
        sys.exit(run_feed(config.get("feed") or {}, config.get("root"), journal))
    from palace_conformance.fake.options import ENV_JOURNAL

    if journal:
        os.environ[ENV_JOURNAL] = journal


def run_cli(config_path: str, argv: Sequence[str] | None = None) -> None:
    """The ``mempalace`` stand-in (the script, and the fake package's ``mempalace.cli`` inside a
    runner's world): journal the run as a ``helper_run``, then be the fake CLI."""
    argv = list(sys.argv if argv is None else argv) or [CLI_HELPER]
    main(CLI_HELPER, config_path, argv)
    from palace_conformance.fake.mempalace_cli import mempalace_cli_main

    mempalace_cli_main(argv[1:], argv0=argv[0])
