"""A draft bridge profile from what the observation sessions showed (observations in, draft out).

Pure: no processes, no files. Every field is filled only from evidence, and every guess or gap is
a note for the person who reviews the draft (JSON has no comments, so the notes go to stderr).
What observation cannot know is left for them: whether the bridge is a copy of the seed
(``claims.seed_copy`` is always written ``false``), fixed constants and absent behaviours in place
of knobs, and the content of the settings files it looked for.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from palace_conformance.contract import CAPABILITIES
from palace_conformance.runner.profiling.matching import match_knobs, match_tools
from palace_conformance.runner.profiling.observe import STATUS_TOOL, Session

#: seed variables whose absence in a bridge's reads is worth a note (every scenario sets some)
CORE_KNOBS = ("MEMPALACE_MCP_TIMEOUT_MS", "MEMPALACE_MCP_INIT_TIMEOUT_MS",
              "MEMPALACE_MCP_MAX_RESPAWNS", "MEMPALACE_MCP_RESPAWN_BACKOFF_MS",
              "MEMPALACE_EXT_DEBUG")
STDIO_KNOBS = frozenset({"MEMPALACE_MCP_MAX_RESPAWNS", "MEMPALACE_MCP_RESPAWN_BACKOFF_MS"})
#: seed variables whose reading is evidence of a capability
_CAPABILITY_KNOBS = {
    "feeding": ("MEMPALACE_FEED", "MEMPALACE_FEED_BIN", "MEMPALACE_FEED_WING",
                "MEMPALACE_FEED_DEBOUNCE_MS", "MEMPALACE_FEED_PREPARE_TIMEOUT_MS",
                "MEMPALACE_FEED_MINE_TIMEOUT_MS", "MEMPALACE_PI_SSH_TARGET"),
    "provenance": ("MEMPALACE_PI_DEVICE",),
    "mailbox": ("MEMPALACE_MAILBOX", "MEMPALACE_MAILBOX_POLL_MS"),
    "session_preamble": ("MEMPALACE_SESSION_PREAMBLE",),
    "keepalive": ("MEMPALACE_MCP_KEEPALIVE_MS",),
}
#: programs the run already provides or that are no palace server: never path_programs
_PROVIDED = frozenset({"mempalace-mcp", "mempalace-light-mcp", "mempalace",
                       "mempalace-pi-session", "node", "sh", "bash", "env"})
_PYTHON = re.compile(r"^python[0-9.]*$")
_PROGRAM = re.compile(r"^[A-Za-z0-9._-]+$")
_SERVER_LIKE = re.compile(r"palace|mcp", re.IGNORECASE)
_FEED_EVENTS = frozenset({"agent_settled", "agent_end", "turn_end", "session_before_compact"})
_NAME_MAX = 80


@dataclass
class Draft:
    profile: dict[str, Any]
    notes: list[str] = field(default_factory=list)


def profile_name(bridge: str) -> str:
    """A short name from the bridge: the extension's file name, else the spec or program."""
    kind, sep, rest = bridge.partition(":")
    if sep and kind == "pi-extension":
        stem = Path(rest.partition("?")[0]).stem or rest
    elif bridge.strip() and " " in bridge.strip():
        stem = Path(bridge.split()[0]).name
    else:
        stem = bridge
    suffix = " (draft from profile init: review it)"
    return stem[:_NAME_MAX - len(suffix)] + suffix


def profile_entry(bridge: str, out_dir: Path | None) -> str:
    """``--bridge`` as given; a ``pi-extension:`` file is made relative to the profile's folder
    (a profile's relative entry is read from there), or absolute when there is no file."""
    kind, sep, rest = bridge.partition(":")
    if not (sep and kind == "pi-extension"):
        return bridge
    file, query_sep, query = rest.partition("?")
    absolute = Path(file).expanduser().resolve()
    where = str(absolute)
    if out_dir is not None:
        folder = out_dir.resolve()
        if os.path.commonpath([absolute, folder]) != absolute.anchor:  # not only "/" in common
            where = os.path.relpath(absolute, folder)
    return f"pi-extension:{where}{query_sep}{query}"


def derive(bridge: str, sessions: Sequence[Session], catalogue: Sequence[Mapping[str, Any]], *,
           out_dir: Path | None = None) -> Draft:
    """The draft profile and the review notes."""
    draft = Draft({"schema_version": 1, "name": profile_name(bridge),
                   "entry": profile_entry(bridge, out_dir)})
    notes = draft.notes
    observed = [s for s in sessions if s.status == "observed"]
    for session in sessions:
        if session.status != "observed":
            notes.append(f"{session.transport}: no observation ({session.reason})")
    if observed and not any(s.observed for s in observed):
        notes.append("the host did not report what the bridge read (introspect has no "
                     "'observed'; DRIVER.md): knobs, files and programs could not be drafted")
    env_reads = sorted({name for s in observed for name in s.env_reads})
    knobs = _knobs(env_reads, notes)
    capabilities = _capabilities(observed, env_reads, knobs, notes)
    if any(s.observed for s in observed):
        _unread_knobs(env_reads, knobs, capabilities, notes)
    draft.profile["claims"] = {"capabilities": capabilities, "seed_copy": False}
    notes.append("claims.seed_copy is false: observation cannot tell a copy of the seed's "
                 "mempalace.ts; set it true (the run is then judged at level seed) if it is one")
    sections = {"knobs": knobs, "files": _files(observed, notes),  # drafted in this order
                "path_programs": _programs(observed, notes), "servers": servers_of(observed, notes),
                "tools": _tools(observed, catalogue, notes), "results": results_of(observed, notes),
                "channels": _channels(observed, notes)}
    draft.profile.update({name: value for name, value in sections.items() if value})
    return draft


def capabilities_of(sessions: Sequence[Session]) -> list[str]:
    """The capabilities a draft would claim from these sessions (a run without a profile is
    judged with them: runner/profiling/detect.py)."""
    observed = [s for s in sessions if s.status == "observed"]
    env_reads = sorted({name for s in observed for name in s.env_reads})
    return _capabilities(observed, env_reads, _knobs(env_reads, []), [])


def channels_of(sessions: Sequence[Session]) -> dict[str, str]:
    """The agent-visible channels a draft would write from these sessions (a run without a
    profile applies them too: runner/profiling/detect.py)."""
    return _channels([s for s in sessions if s.status == "observed"], [])


def _knobs(env_reads: Sequence[str], notes: list[str]) -> dict[str, Any]:
    found = match_knobs(env_reads)
    knobs: dict[str, Any] = {}
    for seed, guess in sorted(found.mapped.items()):
        knobs[seed] = {"env": guess.env} if guess.unit == "ms" else {"env": guess.env,
                                                                      "unit": guess.unit}
        how = "" if guess.strong else " (a loose match: check it)"
        both = (f"; it reads {seed} as well, so the run sets both" if seed in env_reads
                else "")
        notes.append(f"knobs: {guess.env} taken for {seed}{how}"
                     + (", read in seconds" if guess.unit == "s" else "") + both)
    for name, why in found.unmapped:
        notes.append(f"knobs: {name} is not mapped ({why}); map it by hand if it is one")
    return knobs


def _unread_knobs(env_reads: Sequence[str], knobs: Mapping[str, Any],
                  capabilities: Sequence[str], notes: list[str]) -> None:
    """The seed knobs scenarios set that the bridge never read (respawns only matter on stdio)."""
    relevant = [k for k in CORE_KNOBS if "stdio" in capabilities or k not in STDIO_KNOBS]
    missing = [k for k in relevant if k not in env_reads and k not in knobs]
    if missing:
        notes.append(f"knobs: never read {', '.join(missing)}: for each, give its own "
                     'variable, {"fixed": VALUE} for a constant, or {"absent": true} when '
                     "the bridge lacks that behaviour (identity is assumed otherwise)")


def _capabilities(observed: Sequence[Session], env_reads: Sequence[str],
                  knobs: Mapping[str, Any], notes: list[str]) -> list[str]:
    found = {s.transport for s in observed if s.reached}
    for silent in (s for s in observed if not s.reached):
        notes.append(f"claims: the {silent.transport} session never reached the fake, so "
                     f"{silent.transport} is not claimed"
                     + ("; the bridge may want a settings file filled in first (files)"
                        if silent.files else ""))
    events = {e for s in observed for e in s.events}
    if "before_agent_start" in events or any(s.injected or s.system_prompt for s in observed):
        found.add("wakeup")
    diary = sorted({c for s in observed for c in s.commands if "diary" in c.lower()})
    if diary:
        found.add("diary_command")
        if "mempalace-diary" not in diary:
            notes.append(f"claims: diary_command from the command {diary[0]}; the scenarios run "
                         "/mempalace-diary, so check the name")
    read_or_mapped = set(env_reads) | set(knobs)
    for capability, names in _CAPABILITY_KNOBS.items():
        evidence = sorted(read_or_mapped & set(names))
        if evidence:
            found.add(capability)
            notes.append(f"claims: {capability} inferred from reading {evidence[0]}; confirm it")
    if "feeding" not in found and events & _FEED_EVENTS:
        notes.append(f"claims: it handles {', '.join(sorted(events & _FEED_EVENTS))}; add "
                     "feeding if it feeds transcripts to the palace")
    return [c for c in CAPABILITIES if c in found]


def _files(observed: Sequence[Session], notes: list[str]) -> list[dict[str, Any]]:
    paths = sorted({str(f.get("path")) for s in observed for f in s.files
                    if isinstance(f.get("path"), str) and _safe_relative(str(f["path"]))})
    files = []
    for path in paths:
        entry: dict[str, Any] = {"path": "${HOME}/" + path}
        if PurePosixPath(path).suffix.lower() == ".json":
            entry["json"] = {"TODO": "what the bridge reads from this file"}
        else:
            entry["content"] = "TODO: what the bridge reads from this file\n"
        files.append(entry)
    if files:
        notes.append(f"files: it looked for {', '.join('~/' + p for p in paths)}; each entry has "
                     "placeholder content to replace (${FAKE_URL}, ${FAKE_TOKEN} and "
                     "${ENV:NAME} are expanded), or remove the ones it does not need; add "
                     '"when": "remote" for a file only remote runs should have')
    return files


def _safe_relative(path: str) -> bool:
    parts = PurePosixPath(path).parts
    return bool(parts) and not path.startswith("/") and ".." not in parts


#: the light server's program, and the full one's (what a bridge spawns them as on PATH)
LIGHT_SERVER, FULL_SERVER = "mempalace-light-mcp", "mempalace-mcp"


def servers_of(observed: Sequence[Session], notes: list[str]) -> dict[str, str]:
    """``servers`` when one session started both the full and the light server."""
    for session in observed:
        started = {PurePosixPath(str(s.get("argv", [""])[0])).name for s in session.spawned
                   if isinstance(s.get("argv"), list) and s.get("argv") and not s.get("error")}
        if {LIGHT_SERVER, FULL_SERVER} <= started:
            notes.append(f"servers: it started both {FULL_SERVER} and {LIGHT_SERVER}; the "
                         "process and initialize counts judge the full server's children")
            return {"full": FULL_SERVER, "light": LIGHT_SERVER}
    return {}


def _programs(observed: Sequence[Session], notes: list[str]) -> list[str]:
    tried: dict[str, bool] = {}  # program -> it failed to start (not found)
    for session in observed:
        attempts = [(s.get("argv"), s.get("error")) for s in session.spawned]
        attempts += [(argv, None) for argv in session.ran]
        for argv, error in attempts:
            if not isinstance(argv, list) or not argv:
                continue
            program = str(argv[0])
            missing = error in ("ENOENT", "EACCES")
            tried[program] = tried.get(program, False) or missing
    programs, others = [], []
    for program, missing in sorted(tried.items()):
        if _PYTHON.match(PurePosixPath(program).name):
            _python_note(program, observed, notes)
            continue
        if "/" in program or program in _PROVIDED:
            continue
        if _PROGRAM.match(program) and (missing or _SERVER_LIKE.search(program)):
            programs.append(program)
        else:
            others.append(program)
    if programs:
        notes.append(f"path_programs: the fake will answer as {', '.join(programs)} (it tried "
                     "to start them); remove any that is not a palace server")
    if others:
        notes.append(f"path_programs: it also ran {', '.join(others)} (left out: they started "
                     "and do not look like a palace server)")
    return programs


def _python_note(program: str, observed: Sequence[Session], notes: list[str]) -> None:
    """A bridge that runs the mempalace package itself needs it importable in the run."""
    argvs = [a for s in observed for a in [x.get("argv") for x in s.spawned] + list(s.ran)
             if isinstance(a, list) and a and a[0] == program]
    if any("mempalace" in " ".join(str(w) for w in argv[1:]) for argv in argvs):
        notes.append(f"path_programs: it ran {program} with the mempalace package "
                     f"({' '.join(str(w) for w in argvs[0])}); the runner puts a fake mempalace "
                     "package first on PYTHONPATH and in the shims' python, so nothing to add")


def tools_seen(observed: Sequence[Session]) -> tuple[dict[str, Any], dict[str, str]]:
    """Every tool the sessions saw registered (name -> its first schema), and the tools the
    fake saw called for each the bridge called (its name -> the catalogue's)."""
    registered: dict[str, Any] = {}
    called: dict[str, str] = {}
    for session in observed:
        for name, schema in session.tools.items():
            registered.setdefault(name, schema)
        called.update(session.called)
    return registered, called


def _tools(observed: Sequence[Session], catalogue: Sequence[Mapping[str, Any]],
           notes: list[str]) -> dict[str, Any]:
    registered, called = tools_seen(observed)
    if not registered:
        notes.append("tools: it registered no tool in either session")
        return {}
    found = match_tools(registered, catalogue, called)
    tools: dict[str, Any] = {}
    if found.mapped:
        tools["map"] = dict(sorted(found.mapped.items()))
        for name, target in sorted(found.mapped.items()):
            notes.append(f"tools: {name} -> {target} ({found.reasons[name]})")
    if found.unmatched:
        tools["extra_allowed"] = True
        verb = "matches" if len(found.unmatched) == 1 else "match"
        notes.append(f"tools: {', '.join(found.unmatched)} {verb} no catalogue tool: "
                     "extra_allowed is true, so tools beyond the catalogue and the map are "
                     "reported, not failed")
    if STATUS_TOOL not in registered and STATUS_TOOL not in found.mapped.values():
        notes.append(f"tools: nothing stands for {STATUS_TOOL}; most scenarios call it")
    reached = [s for s in observed if s.reached and s.tools]
    if found.mapped and reached and not any(s.listed for s in reached):
        tools["static"] = True
        notes.append("tools.static: it registered its tools without ever sending tools/list; "
                     "if it registers them whatever the palace state, keep it (a tools "
                     "expectation of none then means these tools)")
    return tools


def results_of(observed: Sequence[Session], notes: list[str]) -> dict[str, Any]:
    """``results.path`` when the call's result held the palace's text inside an envelope."""
    paths = sorted({s.envelope for s in observed if s.envelope})
    if len(paths) != 1:
        return {}
    notes.append(f"results.path: the palace's answer came back inside an envelope, at "
                 f"{paths[0]}; the result checks judge what is there")
    return {"path": paths[0]}


def _channels(observed: Sequence[Session], notes: list[str]) -> dict[str, str]:
    channels: dict[str, str] = {}
    if any(s.system_prompt for s in observed):
        channels["wakeup"] = "system_prompt"
    elif any(s.injected for s in observed):
        channels["wakeup"] = "message"
    elif any("before_agent_start" in s.events for s in observed):
        notes.append("channels: it handles before_agent_start but gave no wake-up on the first "
                     "prompt; wakeup left at the default (an injected message)")
    notified = sum(s.notify for s in observed)
    printed = sum(s.stderr for s in observed)
    if notified and not printed:
        channels["diagnostics"] = "notify"
    elif printed:
        channels["diagnostics"] = "stderr"
    if "diagnostics" not in channels:
        notes.append("channels: it printed nothing and notified nothing in these sessions; "
                     "diagnostics left at the default (stderr)")
    return channels
