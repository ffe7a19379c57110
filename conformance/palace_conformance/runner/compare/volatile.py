"""Per-run values, and the rules that mask them before two runs are compared.

Two runs of one bridge differ in values no behaviour decides: process ids, ports, temp paths,
ids and timestamps the palace mints, session ids, tokens. ``diff`` must never report them, wherever
they appear: under a JSON key (``"pid": 4242``), inside a tool result's text, inside an error
message (``held by PID 12345``) or an event id (``evt_20261201T160055_fdfa466a5d7c``). The rules are
data: :data:`KEY_RULES` mask a value by the key that holds it, :data:`TEXT_RULES` mask a pattern
in any string, :data:`ERROR_KIND_RULES` merge error kinds that a race, not the bridge, picks.
Each rule carries an example and what it must become, so a test holds every rule to its word, and
docs/drift.md lists them by name (a test keeps the two in step).

Masks are flat (``<pid>``, not ``<pid-1>``): a comparison wants "a pid was here" on both sides;
which process it was is compared by the process facts (spawn counts, signals, exits).
"""

from __future__ import annotations

import contextlib
import functools
import json
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any

ID_MASK = "<id>"
TIME_MASK = "<time>"
DATE_MASK = "<date>"
PID_MASK = "<pid>"
PORT_MASK = "<port>"
SESSION_MASK = "<session>"
SECRET_MASK = "<secret>"
UUID_MASK = "<uuid>"
TMP_MASK = "<tmp>"
REPLICA_MASK = "<replica>"
SCORE_MASK = "<score>"


@dataclass(frozen=True)
class KeyRule:
    """Mask the value under any key in ``keys`` or ending with one of ``suffixes``."""

    name: str
    keys: frozenset[str]
    mask: str
    why: str
    suffixes: tuple[str, ...] = ()
    example: Mapping[str, Any] = field(default_factory=dict)

    def matches(self, key: str) -> bool:
        lowered = key.lower()
        return lowered in self.keys or lowered.endswith(self.suffixes)


@dataclass(frozen=True)
class TextRule:
    """Replace ``pattern`` in every string with ``replacement`` (a ``re.sub`` template)."""

    name: str
    pattern: re.Pattern[str]
    replacement: str
    why: str
    example: str = ""
    masked: str = ""  # what ``example`` must become

    def apply(self, text: str) -> str:
        return self.pattern.sub(self.replacement, text)


@dataclass(frozen=True)
class ErrorKindRule:
    """After a step matching ``after`` (op and request fields), compare these kinds as one."""

    name: str
    after: Mapping[str, str]
    kinds: frozenset[str]
    why: str

    def triggered_by(self, op: str, request: Mapping[str, Any]) -> bool:
        """Whether a step with this op and request starts the rule (for every later step)."""
        return all((op if name == "op" else request.get(name)) == value
                   for name, value in self.after.items())

    def merge(self, kind: str) -> str:
        """``kind``, or every kind of the rule joined (``connection_closed|unavailable``)."""
        return "|".join(sorted(self.kinds)) if kind in self.kinds else kind


#: keys whose value is per-run wherever they appear (tool JSON, results, journal facts)
KEY_RULES: tuple[KeyRule, ...] = (
    KeyRule("pids", frozenset({"pid", "ppid", "pids"}), PID_MASK,
            "a process id is the kernel's choice", suffixes=("_pid",),
            example={"pid": 32677, "holder_pid": 6527}),
    KeyRule("session-ids", frozenset({"session", "session_id", "sessionid", "mcp-session-id"}),
            SESSION_MASK, "an HTTP session id is minted per connection",
            example={"mcp-session-id": "9f2c0d5e1b7a4c3d8e6f0a1b2c3d4e5f"}),
    KeyRule("replicas", frozenset({"origin_replica", "replica_id", "replica"}), REPLICA_MASK,
            "a palace's replica id is random per palace (mempalace 3.11, and the fake)",
            example={"origin_replica": "rep_e72c2f076408faadc4b073c46019005d",
                     "replica_id": "rep_9d3aaca75da286d8520064056c989c68"}),
    KeyRule("ids", frozenset({"id"}), ID_MASK,
            "ids the palace or the runner mint: JSON-RPC ids, drawer, event and entry ids",
            suffixes=("_id",), example={"drawer_id": "drawer_w_r_abc", "id": 7}),
    KeyRule("times", frozenset({"timestamp", "created_at", "updated_at", "filed_at", "date",
                                "time", "hlc", "t", "created_t", "ms", "elapsed_ms", "host_ms",
                                "last_seen", "expires_at"}), TIME_MASK,
            "clock readings and durations", example={"filed_at": "2026-08-01T09:30:00"}),
    KeyRule("scores", frozenset({"similarity", "distance"}), SCORE_MASK,
            "a search's similarity and distance are the embedder's (the real server's runs use "
            "the kit's embedding stub; another embedder ranks otherwise)",
            example={"similarity": 0.8123, "distance": 0.1877}),
    KeyRule("ports", frozenset({"port"}), PORT_MASK, "a listening port is the kernel's choice",
            example={"port": 36195}),
    KeyRule("secrets", frozenset({"token", "authorization", "password", "secret", "api_key",
                                  "access_token", "refresh_token"}), SECRET_MASK,
            "credentials are configuration (a leak is judged by wire_secrets, not here)",
            example={"authorization": "Bearer s3cr3t"}),
)

_HEX = "[0-9a-fA-F]"
#: patterns masked in every string, in this order (the run's own temp dir and fake URL first)
TEXT_RULES: tuple[TextRule, ...] = (
    TextRule("iso-time",
             re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?"),
             TIME_MASK, "a date-time written into text",
             "filed 2026-08-01T09:30:00.123Z", f"filed {TIME_MASK}"),
    TextRule("compact-time", re.compile(r"(?<!\d)\d{8}[T_]\d{6}\d*(?!\d)"), TIME_MASK,
             "a clock reading baked into a minted id (an event id)",
             "evt_20261201T160055_fdfa466a5d7c", f"evt_{TIME_MASK}_fdfa466a5d7c"),
    TextRule("pid-in-text", re.compile(r"\b(?i:(pid|process id))(\s*[:=#]?\s*)\d+\b"),
             rf"\1\2{PID_MASK}", "a process id quoted in a message",
             "palace is held by PID 12345 (mempalace mine)",
             f"palace is held by PID {PID_MASK} (mempalace mine)"),
    TextRule("loopback-port", re.compile(r"\b(127\.0\.0\.1|localhost|\[::1\]|0\.0\.0\.0):\d+\b"),
             rf"\1:{PORT_MASK}", "a port on this machine",
             "cannot reach http://127.0.0.1:36195/mcp", f"cannot reach http://127.0.0.1:{PORT_MASK}/mcp"),
    TextRule("replica-id", re.compile(rf"(?<![0-9A-Za-z])rep_{_HEX}{{32}}(?![0-9a-fA-F])"),
             REPLICA_MASK, "a palace's replica id quoted in text, an hlc or a version_vector key",
             "hlc 1796014199840-000000-rep_e72c2f076408faadc4b073c46019005d",
             f"hlc 1796014199840-000000-{REPLICA_MASK}"),
    TextRule("uuid",
             re.compile(rf"(?<![0-9a-fA-F-]){_HEX}{{8}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{4}}-"
                        rf"{_HEX}{{12}}(?![0-9a-fA-F-])|(?<![0-9a-fA-F]){_HEX}{{32}}(?![0-9a-fA-F])"),
             UUID_MASK, "a random id (an HTTP session id) quoted in text",
             "session 9f2c0d5e1b7a4c3d8e6f0a1b2c3d4e5f expired", f"session {UUID_MASK} expired"),
    TextRule("temp-path",
             re.compile(r"(?<![\w.~-])(?:/private)?/(?:tmp|var/tmp|var/folders/[^/\s]+/[^/\s]+/T)"
                        r"/[^/\s\"'`(),;:]+"),
             TMP_MASK, "a temp dir another process made (the run's own is ${TMP})",
             "wrote /tmp/pi-mcp-8f3k2/state.json", f"wrote {TMP_MASK}/state.json"),
    TextRule("bearer", re.compile(r"\b(Bearer)\s+(?!<)[A-Za-z0-9._~+/=-]+"), rf"\1 {SECRET_MASK}",
             "a credential quoted in text", "Authorization: Bearer abc.def", f"Authorization: "
             f"Bearer {SECRET_MASK}"),
)

#: masked only where a side ran against the real server (``diff --server real``)
REAL_SERVER_TEXT_RULES: tuple[TextRule, ...] = (
    TextRule("real-event-id", re.compile(rf"(evt_{re.escape(TIME_MASK)}_){_HEX}{{12}}(?!{_HEX})"),
             rf"\1{ID_MASK}", "the real server's event id ends in a random part (the fake's is "
             "derived from the event, so on the fake it still counts)",
             f"evt_{TIME_MASK}_661adc631c0f", f"evt_{TIME_MASK}_{ID_MASK}"),
)

#: error kinds a race picks: after the runner killed the palace, a call on a connection the
#: client still holds fails mid-exchange (connection_closed) or, when the client noticed the
#: close first, at connect (unavailable); the same bridge gives either from run to run
ERROR_KIND_RULES: tuple[ErrorKindRule, ...] = (
    ErrorKindRule("palace-killed", {"op": "server", "action": "kill"},
                  frozenset({"connection_closed", "unavailable"}),
                  "after the runner kills the palace, whether the next call fails on the old "
                  "connection or at connect is a race, not the bridge's choice"),
)


def run_dates(started_at: str | None = None) -> list[date]:
    """The days a run may have written as "today": its start date (or now) and its neighbours
    (a run across midnight, a bridge in another time zone)."""
    day = datetime.now().astimezone().date()
    if started_at:
        with contextlib.suppress(ValueError):
            day = datetime.fromisoformat(started_at).date()
    return sorted({day + timedelta(days=d) for d in (-1, 0, 1)})


def _date_rules(days: Sequence[date]) -> list[TextRule]:
    forms = [f for day in days for f in (f"{day:%Y-%m-%d}", f"{day:%Y%m%d}")]
    if not forms:
        return []
    pattern = re.compile(r"(?<!\d)(?:" + "|".join(map(re.escape, forms)) + r")(?!\d)")
    return [TextRule("run-date", pattern, DATE_MASK, "the run's own date written into text")]


class _RuleMemo:
    """Texts after one set of text rules, shared by every :class:`Masker` with that set: a
    catalogue's runs repeat the same strings (the tool catalogue and its schemas, the palace's
    messages) run after run, and the rules are a pure function of the text. Bounded: past
    :data:`RULE_MEMO_CHARS` characters held it starts afresh."""

    def __init__(self) -> None:
        self.texts: dict[str, str] = {}
        self.chars = 0

    def keep(self, text: str, masked: str) -> None:
        if self.chars > RULE_MEMO_CHARS:
            self.texts, self.chars = {}, 0
        self.texts[text] = masked
        self.chars += len(text) + len(masked)


#: characters a rule set's memo holds before it starts afresh (a few tens of MB at most)
RULE_MEMO_CHARS = 8_000_000
_RULE_MEMOS: dict[tuple[tuple[str, str, int, str], ...], _RuleMemo] = {}
_RULE_MEMOS_LOCK = threading.Lock()


def _rule_memo(rules: Sequence[TextRule]) -> _RuleMemo:
    """The memo of this rule set (each rule by its name, pattern, flags and replacement)."""
    key = tuple((rule.name, rule.pattern.pattern, rule.pattern.flags, rule.replacement)
                for rule in rules)
    with _RULE_MEMOS_LOCK:
        return _RULE_MEMOS.setdefault(key, _RuleMemo())


class Masker:
    """One run's view of the rules: its own values (``${TMP}``, ``${FAKE_URL}``) replaced by name,
    then every text rule, then its dates; keys masked by :data:`KEY_RULES`."""

    def __init__(self, replacements: Sequence[tuple[str, str]] = (),
                 days: Sequence[date] = (), extra: Sequence[TextRule] = ()) -> None:
        self.replacements = sorted((pair for pair in replacements if pair[0]),
                                   key=lambda pair: len(pair[0]), reverse=True)
        self.rules = [*TEXT_RULES, *extra, *_date_rules(days)]
        #: each string masked once: a trace repeats its keys and values thousands of times
        self._masked: dict[str, str] = {}
        #: and the rules' part once for every run with the same rules
        self._ruled = _rule_memo(self.rules)

    def text(self, value: str) -> str:
        masked = self._masked.get(value)
        if masked is None:
            replaced = value
            for raw, name in self.replacements:
                replaced = replaced.replace(raw, name)
            masked = self._ruled.texts.get(replaced)
            if masked is None:
                masked = replaced
                for rule in self.rules:
                    masked = rule.apply(masked)
                self._ruled.keep(replaced, masked)
            self._masked[value] = masked
        return masked

    def value(self, value: Any, key: str = "") -> Any:
        """A masked copy of a JSON value; text items holding JSON are read as data first."""
        rule = key_rule(key) if key else None
        if rule is not None and value is not None:
            if not isinstance(value, dict | list):
                return rule.mask
            if isinstance(value, list):  # "pids": [4242, 4243]
                return [rule.mask if v is not None and not isinstance(v, dict | list)
                        else self._inner(v) for v in value]
        return self._inner(value)

    def _inner(self, value: Any) -> Any:
        if isinstance(value, dict):
            value = _embedded_json(value)
            # keys are masked as text too: a version_vector is keyed by replica ids
            return {self.text(k) if isinstance(k, str) else k: self.value(v, str(k))
                    for k, v in value.items()}
        if isinstance(value, list):
            return [self.value(v) for v in value]
        if isinstance(value, str):
            return self.text(value)
        return value


@functools.lru_cache(maxsize=4096)
def key_rule(key: str) -> KeyRule | None:
    """The first of :data:`KEY_RULES` that masks the value under ``key``, if any."""
    return next((rule for rule in KEY_RULES if rule.matches(key)), None)


def _embedded_json(item: dict[str, Any]) -> dict[str, Any]:
    """``{"type": "text", "text": "{...}"}`` read as ``{"type": "text", "json": {...}}``: a tool's
    JSON text compared as data (key by key, keys masked), wherever the item sits."""
    text = item.get("text")
    if item.get("type") != "text" or not isinstance(text, str):
        return item
    stripped = text.strip()
    if stripped[:1] not in ("{", "["):
        return item
    try:
        parsed = json.loads(stripped)
    except (ValueError, RecursionError):
        return item
    return {**{k: v for k, v in item.items() if k != "text"}, "json": parsed}
