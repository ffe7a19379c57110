"""The helper programs the runner puts on a bridge's PATH next to the fake ``mempalace-mcp``.

fixtures/README.md promises that every run of ``mempalace-pi-session`` (the transcript exporter
a feeding bridge runs) and of ``mempalace`` (the CLI a bridge must never run) is journaled as
``{"kind": "helper_run", "name", "argv"}``. The fake's own shims journal other kinds
(``feed_prepare``, ``cli_run``), so the runner installs these wrappers over them:

* ``mempalace-pi-session`` behaves as the scenario's ``helpers.feed`` says: waits ``delay_ms``,
  exits ``exit_code`` when it is non-zero, else creates ``files`` under ``mine_source`` and prints
  ``MINE_SOURCE=<mine_source>`` (nothing when ``mine_source`` is null);
* ``mempalace`` journals the run, then behaves like the fake CLI (which adds a ``cli_run`` record).

The journal path and behaviour are baked into a per-run config file named in the script itself, so
a bridge that scrubs its helpers' environment is still journaled. This module is started with
``python -S`` on every helper run: standard library and the journal module only.
"""

from __future__ import annotations

import json
import os
import shlex
import stat
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

FEED_HELPER = "mempalace-pi-session"
CLI_HELPER = "mempalace"
HELPERS = (FEED_HELPER, CLI_HELPER)
RECORD_KIND = "helper_run"
_SECRET_WORDS = ("TOKEN", "SECRET", "PASSWORD", "KEY")


def install(directory: Path, config: Mapping[str, Any], python: str | None = None) -> list[Path]:
    """Write the two stand-ins into ``directory`` (replacing the fake's shims of the same name)."""
    directory.mkdir(parents=True, exist_ok=True)
    config_path = directory / ".standins.json"
    config_path.write_text(json.dumps(dict(config)), encoding="utf-8")
    package_root = str(Path(__file__).resolve().parent.parent.parent)
    python = python or sys.executable
    written = []
    for name in HELPERS:
        code = (f"import sys; sys.path[:0] = [{package_root!r}]; "
                "from palace_conformance.standins.scripted import main; "
                f"main({name!r}, {str(config_path)!r})")
        path = directory / name
        path.write_text("#!/bin/sh\n"
                        f"# palace-conformance runner stand-in for {name}: journals every run\n"
                        f'exec {shlex.quote(python)} -S -c {shlex.quote(code)} "$0" "$@"\n',
                        encoding="utf-8")
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        written.append(path)
    return written


def _env_subset(env: Mapping[str, str]) -> dict[str, str]:
    out = {}
    for key, value in sorted(env.items()):
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


def run_feed(feed: Mapping[str, Any]) -> int:
    """``helpers.feed``: delay, fail, or stage the files and print ``MINE_SOURCE=<path>``."""
    delay_ms = int(feed.get("delay_ms") or 0)
    if delay_ms:
        time.sleep(delay_ms / 1000)
    exit_code = int(feed.get("exit_code") or 0)
    if exit_code:
        print(f"{FEED_HELPER}: scripted failure (exit {exit_code})", file=sys.stderr)
        return exit_code
    source = feed.get("mine_source")
    if source:
        target = Path(source)
        target.mkdir(parents=True, exist_ok=True)
        for name, text in (feed.get("files") or {}).items():
            file = target / name
            file.parent.mkdir(parents=True, exist_ok=True)
            file.write_text(str(text), encoding="utf-8")
        print(f"MINE_SOURCE={source}", flush=True)
    return 0


def main(name: str, config_path: str) -> None:
    """Entry point of a stand-in script: ``argv[1]`` is how it was invoked, then its arguments."""
    argv = sys.argv[1:] or [name]
    try:
        config = json.loads(Path(config_path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        print(f"{name} (palace-conformance stand-in): cannot read {config_path}: {exc}",
              file=sys.stderr)
        sys.exit(2)
    journal = config.get("journal")
    _journal(journal, name, argv)
    if name == FEED_HELPER:
        sys.exit(run_feed(config.get("feed") or {}))
    from palace_conformance.fake.commands import mempalace_cli_main
    from palace_conformance.fake.options import ENV_ARGV0, ENV_JOURNAL

    if journal:
        os.environ[ENV_JOURNAL] = journal
    os.environ[ENV_ARGV0] = argv[0]
    mempalace_cli_main(argv[1:])
