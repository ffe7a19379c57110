"""A scriptable stand-in for ``mempalace-pi-session --prepare`` (the transcript exporter).

The real exporter stages this machine's pi transcripts and prints ``MINE_SOURCE=<path>``; a bridge
then mines that path through its own palace client. This stand-in does what a scenario asks:

* ``source`` (default): stage a small transcript in a directory of its own and print
  ``MINE_SOURCE=<dir>`` (mempalace 3.11 mines a directory; one file only with ``mode: convos``);
* ``none``: print nothing (nothing worth feeding);
* ``hang``: never finish (the bridge's prepare timeout must kill it);
* ``fail``: exit non-zero with one stderr line.

A named preset (``PALACE_FAKE_PRESET``, baked into this shim by ``fake install-shim --preset``)
may script it too (its ``standins`` entry for this program, e.g. ``wedged-prepare``: hang); the
variables and plan above still win over the preset.

Whatever the mode, it first appends one ``feed_prepare`` record (argv, the relevant environment,
the mode, its invocation number) to ``$PALACE_FEED_RECORD`` or else the fake's journal
``$PALACE_FAKE_JOURNAL``, so fixtures count prepares on the same timeline as ``tools/call``s.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from palace_conformance.contract import FEED_SESSION_MODES as MODES
from palace_conformance.contract import FEED_SESSION_PROGRAM as PROGRAM
from palace_conformance.errors import UsageError as UsageError
from palace_conformance.fake.journal import REDACTED, Journal, read_journal
from palace_conformance.processes import HOST_MARK

TYPE_CHECKING = False  # typing.TYPE_CHECKING, unimported: pyproject.toml's helper-start contracts

if TYPE_CHECKING:  # imported where used: pathlib costs every helper's start about 5 ms
    from pathlib import Path
    from typing import Any, NoReturn

RECORD_KIND = "feed_prepare"
ENV_MODE = "PALACE_FEED_MODE"
ENV_DELAY = "PALACE_FEED_DELAY_MS"
ENV_EXIT = "PALACE_FEED_EXIT"
ENV_PLAN = "PALACE_FEED_PLAN"
ENV_OUTDIR = "PALACE_FEED_OUTDIR"
ENV_RECORD = "PALACE_FEED_RECORD"
ENV_ARGV0 = "PALACE_FAKE_ARGV0"  # a wrapper's own path, recorded instead of argv[0]
ENV_JOURNAL = "PALACE_FAKE_JOURNAL"
ENV_PRESET = "PALACE_FAKE_PRESET"  # fake.options.ENV_PRESET: a preset's standins entry
_SECRET_WORDS = ("TOKEN", "SECRET", "PASSWORD", "KEY")

HELP_EPILOG = f"""\
scripting (environment):
  {ENV_MODE}     one of {', '.join(MODES)} (default source)
  {ENV_DELAY}  wait this long before acting (default 0)
  {ENV_EXIT}     exit status in fail mode (default 1)
  {ENV_PLAN}     JSON file: a list of steps, the Nth call uses step N (the last repeats);
                      a step is a mode or {{"mode", "delay_ms", "exit"}} (same as --plan)
  {ENV_OUTDIR}   where transcripts are staged (default $HOME/.mempalace-pi-session/staged)
  {ENV_RECORD}   JSON-lines file for the call record (default ${ENV_JOURNAL})
  {ENV_PRESET}   a named preset whose "standins" scripts this program (below the above)
"""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message} (see --help)")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROGRAM, description="palace-conformance stand-in for the pi transcript "
                     "exporter: prints MINE_SOURCE=<path> as scripted, never touches a palace.",
                     epilog=HELP_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prepare", action="store_true", required=True,
                        help="stage the export and print MINE_SOURCE=<path> (the only mode)")
    parser.add_argument("--reason", default="manual", help="what triggered the feed")
    parser.add_argument("--wing", default="wing_conversations", help="target wing")
    parser.add_argument("--plan", metavar="FILE", help=f"step plan (env {ENV_PLAN})")
    return parser


def _env_subset(env: dict[str, str]) -> dict[str, str]:
    """The variables a bridge is expected to pass on; anything secret-looking is redacted. The
    runner's host mark is its own bookkeeping (every process a host starts carries it), left
    out so a journal reads the same from run to run."""
    out = {}
    for key, value in sorted(env.items()):
        if key == HOST_MARK:
            continue
        if key.startswith(("MEMPALACE_", "PALACE_")) or key == "HOME":
            out[key] = REDACTED if any(w in key for w in _SECRET_WORDS) else value
    return out


def _integer(name: str, raw: Any, default: int) -> int:
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except (TypeError, ValueError):
        raise UsageError(f"{PROGRAM}: {name} must be an integer, got {raw!r}") from None


def _preset_step(name: str | None) -> dict[str, Any]:
    """The step a preset scripts for this program ({} when it scripts none); the preset file
    checked it when it loaded."""
    if not name:
        return {}
    from palace_conformance.fake.faults import FakeSetupError
    from palace_conformance.fake.presets import find_preset

    try:
        return dict(find_preset(name).standins.get(PROGRAM, {}))
    except FakeSetupError as exc:
        raise UsageError(f"{PROGRAM}: {exc}") from None


def _step(env: dict[str, str], plan_path: str | None, invocation: int) -> dict[str, Any]:
    step: dict[str, Any] = {"mode": "source", "delay_ms": None, "exit": None,
                            **_preset_step(env.get(ENV_PRESET))}
    for key, variable in (("mode", ENV_MODE), ("delay_ms", ENV_DELAY), ("exit", ENV_EXIT)):
        if env.get(variable):
            step[key] = env[variable]
    if plan_path:
        try:
            with open(plan_path, encoding="utf-8") as handle:
                plan = json.load(handle)
        except (OSError, ValueError) as exc:
            raise UsageError(f"{PROGRAM}: cannot read plan {plan_path}: {exc}; "
                             "give a JSON list of steps") from None
        if not isinstance(plan, list) or not plan:
            raise UsageError(f"{PROGRAM}: plan {plan_path} must be a non-empty JSON list of steps")
        chosen = plan[min(invocation, len(plan) - 1)]
        step.update({"mode": chosen} if isinstance(chosen, str) else dict(chosen))
    if step["mode"] not in MODES:
        raise UsageError(f"{PROGRAM}: unknown mode {step['mode']!r}; use one of {', '.join(MODES)}")
    step["delay_ms"] = _integer("delay_ms", step.get("delay_ms"), 0)
    step["exit"] = _integer("exit", step.get("exit"), 1)
    return step


def _record(env: dict[str, str], argv: list[str]) -> tuple[Journal | None, int]:
    """Append the call record; returns the journal and this call's 0-based invocation number."""
    path = env.get(ENV_RECORD) or env.get(ENV_JOURNAL)
    if not path:
        return None, 0
    journal = Journal(path, "feed_session")
    with journal.exclusive():
        invocation = sum(1 for r in read_journal(path) if r.get("kind") == RECORD_KIND)
        journal.record(RECORD_KIND, argv=argv, env=_env_subset(env), invocation=invocation)
    return journal, invocation


def _stage(env: dict[str, str], reason: str, wing: str, invocation: int) -> Path:
    from pathlib import Path

    home = env.get("HOME") or str(Path.home())
    outdir = Path(env.get(ENV_OUTDIR) or Path(home) / ".mempalace-pi-session" / "staged")
    outdir.mkdir(parents=True, exist_ok=True)
    staged = outdir / f"pi-session-{reason}-{os.getpid()}-{invocation}"
    staged.mkdir(parents=True, exist_ok=True)
    path = staged / "session.jsonl"
    lines = [
        {"role": "user", "content": f"stand-in transcript #{invocation} ({reason}) for {wing}"},
        {"role": "assistant", "content": "Acknowledged; this exchange exists to be mined."},
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return staged


def main(argv: list[str] | None = None, argv0: str | None = None) -> int:
    """One run; ``argv0`` (how it was invoked, as recorded) yields to ``PALACE_FAKE_ARGV0``."""
    env = dict(os.environ)
    argv0 = env.pop(ENV_ARGV0, "") or argv0 or PROGRAM
    args_in = list(sys.argv[1:] if argv is None else argv)
    recorded_argv = [argv0, *args_in]
    journal, invocation = _record(env, recorded_argv)
    try:
        args = _parser().parse_args(args_in)
        step = _step(env, args.plan or env.get(ENV_PLAN), invocation)
    except UsageError as exc:
        print(exc, file=sys.stderr)
        return 2
    if journal is not None:
        preset = {"preset": env[ENV_PRESET]} if env.get(ENV_PRESET) else {}
        journal.record("feed_step", invocation=invocation, **step, **preset)
    if step["delay_ms"]:
        time.sleep(step["delay_ms"] / 1000)
    mode = step["mode"]
    if mode == "hang":
        while True:
            time.sleep(3600)
    if mode == "fail":
        print(f"{PROGRAM}: scripted failure (exit {step['exit']})", file=sys.stderr)
        return int(step["exit"])
    if mode == "source":
        path = _stage(env, args.reason, args.wing, invocation)
        print(f"MINE_SOURCE={path}", flush=True)
    return 0


def shim_main() -> None:
    """Entry point of the ``mempalace-pi-session`` shim written by ``fake install-shim``."""
    sys.exit(main(argv0=sys.argv[0]))


if __name__ == "__main__":
    shim_main()
