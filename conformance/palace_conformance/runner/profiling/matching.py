"""How a bridge's own names are matched onto the seed's: knob names and tool names.

Heuristics, written down so a person reviewing a draft can tell why a name landed where it did.
A knob name is split into its ``_``-separated words; each seed variable has rules naming the words
a name must contain (one of each group). A rule is *strong* when its words leave no doubt
(``TOOL`` + ``TIMEOUT``) and *weak* when any such knob would match (``REQUEST`` + ``TIMEOUT``); when
two names claim the same seed variable the strong one wins and the other is reported unmapped.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: every variable the seed bridge reads (README "The reference bridge", palace_bridge/config.py)
SEED_KNOBS: tuple[str, ...] = (
    "MEMPALACE_REMOTE_URL", "MEMPALACE_REMOTE_TOKEN", "MEMPALACE_MCP_BIN",
    "MEMPALACE_MCP_TIMEOUT_MS", "MEMPALACE_MCP_INIT_TIMEOUT_MS", "MEMPALACE_MCP_MAX_RESPAWNS",
    "MEMPALACE_MCP_RESPAWN_BACKOFF_MS", "MEMPALACE_EXT_DEBUG", "MEMPALACE_MCP_KILL_GRACE_MS",
    "MEMPALACE_MCP_KEEPALIVE_MS", "MEMPALACE_SESSION_PREAMBLE", "MEMPALACE_REMOTE_CONNECT_RETRIES",
    "MEMPALACE_REMOTE_CONNECT_BACKOFF_MS", "MEMPALACE_AGENT_NAME", "MEMPALACE_PI_DEVICE",
    "MEMPALACE_FEED", "MEMPALACE_FEED_BIN", "MEMPALACE_FEED_WING", "MEMPALACE_FEED_DEBOUNCE_MS",
    "MEMPALACE_FEED_PREPARE_TIMEOUT_MS", "MEMPALACE_FEED_MINE_TIMEOUT_MS",
    "MEMPALACE_PI_SSH_TARGET", "MEMPALACE_MAILBOX", "MEMPALACE_MAILBOX_POLL_MS",
)

#: names that belong to the runtime, the harness or the fake, never a bridge's own knob
_NOT_KNOB_PREFIXES = ("NODE_", "NPM_", "JITI_", "PI_", "PALACE_FAKE_", "PYTHON", "XDG_", "LC_")
_NOT_KNOBS = frozenset({"MEMPALACE_PALACE_PATH"})

_SECONDS = frozenset({"S", "SEC", "SECS", "SECOND", "SECONDS"})
_RESTART = frozenset({"RESPAWN", "RESPAWNS", "RESTART", "RESTARTS", "REVIVE", "REVIVES"})


@dataclass(frozen=True)
class _Rule:
    seed: str
    groups: tuple[frozenset[str], ...]  # the name must contain one word of each group
    strong: bool = True


def _rule(seed: str, *groups: str, strong: bool = True) -> _Rule:
    return _Rule(seed, tuple(frozenset(g.split()) for g in groups), strong)


# First match wins, so the more specific rules come first (FEED + TIMEOUT before TIMEOUT).
_RULES: tuple[_Rule, ...] = (
    _rule("MEMPALACE_FEED_PREPARE_TIMEOUT_MS", "FEED FEEDING", "PREPARE", "TIMEOUT"),
    _rule("MEMPALACE_FEED_MINE_TIMEOUT_MS", "FEED FEEDING", "MINE MINING", "TIMEOUT"),
    _rule("MEMPALACE_FEED_DEBOUNCE_MS", "FEED FEEDING", "DEBOUNCE INTERVAL WINDOW"),
    _rule("MEMPALACE_FEED_BIN", "FEED FEEDING", "BIN CMD COMMAND PROGRAM HELPER"),
    _rule("MEMPALACE_FEED_WING", "WING"),
    _rule("MEMPALACE_FEED", "FEED FEEDING"),
    _rule("MEMPALACE_MAILBOX_POLL_MS", "MAILBOX INBOX", "POLL INTERVAL"),
    _rule("MEMPALACE_MAILBOX", "MAILBOX INBOX"),
    _rule("MEMPALACE_REMOTE_CONNECT_RETRIES", "CONNECT CONNECTION", "RETRIES RETRY ATTEMPTS"),
    _rule("MEMPALACE_REMOTE_CONNECT_BACKOFF_MS", "CONNECT CONNECTION", "BACKOFF DELAY"),
    _rule("MEMPALACE_MCP_INIT_TIMEOUT_MS",
          "INIT INITIALIZE START STARTUP HANDSHAKE CONNECT SPAWN BOOT", "TIMEOUT"),
    _rule("MEMPALACE_MCP_TIMEOUT_MS", "TOOL TOOLS CALL CALLS", "TIMEOUT"),
    _rule("MEMPALACE_MCP_KEEPALIVE_MS", "KEEPALIVE PING HEARTBEAT"),
    _rule("MEMPALACE_MCP_TIMEOUT_MS", "TIMEOUT", strong=False),
    _rule("MEMPALACE_MCP_KILL_GRACE_MS", "KILL GRACE"),
    _rule("MEMPALACE_MCP_RESPAWN_BACKOFF_MS", " ".join(_RESTART), "BACKOFF DELAY WAIT"),
    _rule("MEMPALACE_MCP_RESPAWN_BACKOFF_MS", "BACKOFF", strong=False),
    _rule("MEMPALACE_MCP_MAX_RESPAWNS", " ".join(_RESTART),
          "MAX BUDGET LIMIT COUNT ATTEMPTS RETRIES"),
    _rule("MEMPALACE_MCP_MAX_RESPAWNS", "RESPAWNS RESTARTS", strong=False),
    _rule("MEMPALACE_EXT_DEBUG", "DEBUG VERBOSE TRACE"),
    _rule("MEMPALACE_SESSION_PREAMBLE", "PREAMBLE"),
    _rule("MEMPALACE_AGENT_NAME", "AGENT", "NAME ID"),
    _rule("MEMPALACE_PI_DEVICE", "DEVICE"),
    _rule("MEMPALACE_PI_SSH_TARGET", "SSH"),
    _rule("MEMPALACE_MCP_BIN", "MCP SERVER", "BIN CMD COMMAND PROGRAM"),
    _rule("MEMPALACE_REMOTE_URL", "URL ENDPOINT"),
    _rule("MEMPALACE_REMOTE_TOKEN", "TOKEN APIKEY SECRET"),
)


@dataclass(frozen=True)
class KnobGuess:
    """One of the bridge's variables matched onto a seed variable."""

    env: str  # the bridge's own name
    seed: str  # the seed variable it stands for
    unit: str  # "ms" or "s"
    strong: bool


def words(name: str) -> list[str]:
    return [w for w in name.upper().split("_") if w]


def looks_like_knob(name: str) -> bool:
    """A variable a bridge author named for their own setting, not the runtime's or the OS's."""
    upper = name.upper()
    if upper in _NOT_KNOBS or upper.startswith(_NOT_KNOB_PREFIXES) or len(words(name)) < 2:
        return False
    return guess_knob(name) is not None


def guess_knob(name: str) -> KnobGuess | None:
    """The seed variable ``name`` most likely stands for, or None."""
    found = set(words(name))
    for rule in _RULES:
        if all(found & group for group in rule.groups):
            seconds = rule.seed.endswith("_MS") and bool(found & _SECONDS)
            return KnobGuess(name, rule.seed, "s" if seconds else "ms", rule.strong)
    return None


@dataclass(frozen=True)
class KnobMatch:
    mapped: dict[str, KnobGuess]  # seed variable -> the bridge's variable for it
    unmapped: list[tuple[str, str]]  # (the bridge's variable, why it was not mapped)


def match_knobs(env_reads: Iterable[str]) -> KnobMatch:
    """The bridge's knob-like variables mapped onto seed variables (seed names it reads itself
    need no entry; identity is the default), also where it reads the seed's name too."""
    read = sorted(set(env_reads))
    mapped: dict[str, KnobGuess] = {}
    unmapped: list[tuple[str, str]] = []
    for name in read:
        if name in SEED_KNOBS or not looks_like_knob(name):
            continue
        guess = guess_knob(name)
        assert guess is not None  # looks_like_knob said so
        # a seed name it reads as well does not make its own one unread: mapped, the run gives
        # both the scenario's value (the seed's name keeps it), whichever the bridge prefers
        held = mapped.get(guess.seed)
        if held is None or (guess.strong and not held.strong):
            if held is not None:
                unmapped.append((held.env, f"looks like {guess.seed} too, but {name} fits better"))
            mapped[guess.seed] = guess
        else:
            unmapped.append((name, f"looks like {guess.seed} too, but {held.env} fits better"))
    return KnobMatch(mapped, unmapped)


# -- tools -----------------------------------------------------------------------------------

_TOOL_KEY = re.compile(r"^[A-Za-z0-9_.:-]+$")
_SIMILAR = 0.8  # difflib ratio two tool names' cores must reach to be taken for each other


def _core(name: str) -> str:
    """A tool name without its namespace: ``palace_search``, ``mcp__palace__search`` -> search."""
    text = name.lower()
    for separator in ("__", ".", ":", "/"):
        text = text.rsplit(separator, 1)[-1]
    for prefix in ("mempalace_", "palace_", "mem_", "mp_"):
        if text.startswith(prefix):
            return text[len(prefix):]
    return text


def _canonical(schema: Any) -> str:
    return json.dumps(schema, sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class ToolMatch:
    mapped: dict[str, str]  # the bridge's tool -> the catalogue tool
    unmatched: list[str]  # its tools that match no catalogue tool
    reasons: dict[str, str]  # the bridge's tool -> how it was matched


def match_tools(registered: Mapping[str, Any], catalogue: Sequence[Mapping[str, Any]],
                called: Mapping[str, str] | None = None) -> ToolMatch:
    """Registered tools that are not catalogue tools, matched onto catalogue tools.

    ``registered``: name -> registered JSON Schema; ``catalogue``: ``tools/list`` entries;
    ``called``: the bridge's tool -> the catalogue tool the fake saw it call (certain).
    Evidence, strongest first: a call the fake saw; a catalogue name inside the tool's name
    (``mcp__x__mempalace_search``); the same schema as exactly one catalogue tool; the names'
    cores alike (among the tools with the same schema, if any).
    """
    names = {str(t["name"]) for t in catalogue}
    by_schema: dict[str, list[str]] = {}
    for tool in catalogue:
        by_schema.setdefault(_canonical(tool.get("inputSchema")), []).append(str(tool["name"]))
    mapped: dict[str, str] = {}
    reasons: dict[str, str] = {}
    unmatched: list[str] = []
    for name in sorted(registered):
        if name in names:
            continue
        if not _TOOL_KEY.match(name):
            unmatched.append(name)
            continue
        target, why = _match_one(name, registered[name], names, by_schema, called or {})
        if target is None:
            unmatched.append(name)
        else:
            mapped[name], reasons[name] = target, why
    return ToolMatch(mapped, unmatched, reasons)


def _match_one(name: str, schema: Any, names: set[str], by_schema: Mapping[str, list[str]],
               called: Mapping[str, str]) -> tuple[str | None, str]:
    if called.get(name) in names:
        return called[name], "the fake saw it call that tool"
    inside = [n for n in names if name.endswith(n)]
    if inside:
        return max(inside, key=len), "its name ends with the catalogue name"
    same = by_schema.get(_canonical(schema), [])
    if len(same) == 1:
        return same[0], "it has exactly that tool's schema"
    core = _core(name)
    pool = same or sorted(names)
    scored = sorted(((difflib.SequenceMatcher(None, core, _core(n)).ratio(), n) for n in pool),
                    reverse=True)
    if scored and scored[0][0] >= _SIMILAR:
        how = "the same schema and a similar name" if same else "a similar name"
        return scored[0][1], how
    return None, ""
