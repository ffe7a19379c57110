"""What a drift is about: the categories a divergence falls in, most agent-relevant first.

``diff`` reports the first divergence of *each* category, so a cosmetic difference in one never
hides one that matters in another. The order is the order of the report: what the agent is handed
(tool results, errors, injected context, the tools it has) before what only the palace or the
machine sees (the wire, the processes). Where each part of a run goes is data, here: a step's
``ok``/``error``/``failure`` are errors; its ``result`` goes by op (:data:`OP_RESULT`); each effect
goes by kind (:data:`EFFECT`); a check goes by what it judges (:func:`check_category`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

TOOL_RESULTS = "tool_results"
ERRORS = "errors"
INJECTED = "injected"
REGISTRATIONS = "registrations"
WIRE = "wire"
PROCESSES = "processes"
OTHER = "other"
UI = "ui"


@dataclass(frozen=True)
class Category:
    name: str  # the JSON name
    title: str  # what the text and Markdown reports print
    what: str  # what falls in it (docs/drift.md)


CATEGORIES: tuple[Category, ...] = (
    Category(TOOL_RESULTS, "tool results", "what each `call_tool` (and each call of a "
             "`call_tools`) returned to the agent"),
    Category(ERRORS, "error kinds", "whether an op failed; the error's kind and code (and the "
             "palace's own message and data for `tool_error`); a host-level failure; an "
             "exception that escaped an event handler (`error` effects)"),
    Category(INJECTED, "injected context", "what the agent's context got: the `event` results "
             "(wake-up and mailbox messages from `before_agent_start`, a `systemPrompt`), "
             "`message`, `user_message` and `injected` effects"),
    Category(REGISTRATIONS, "registrations", "the tools and commands registered (pooled at "
             "start-up, then where they happen), `load`, `reload` and `list_tools` results"),
    Category(WIRE, "wire", "what the palace saw: the tool and arguments of every `tools/call` "
             "it received (from its journal), step by step, and its replies to the runner's "
             "own `rpc` and `http` probes"),
    Category(PROCESSES, "processes", "stdio children started, the signals they got, how they "
             "exited and the helpers run, over the whole run (from the journal); `exec` "
             "effects; the results of `shutdown`, `introspect` and `server` steps"),
    Category(OTHER, "other", "the result of any other op (`set_session`, `command`, `settle`, "
             "...), and checks on timing or setup"),
    Category(UI, "UI only", "effects whose only channel is the user's screen (`notify`: "
             "toasts, start-up banners): left out unless `--include-ui`"),
)
BY_NAME: Mapping[str, Category] = {c.name: c for c in CATEGORIES}
ORDER: Mapping[str, int] = {c.name: i for i, c in enumerate(CATEGORIES)}

#: where a step's ``result`` goes, by op (any other op: :data:`OTHER`)
OP_RESULT: Mapping[str, str] = {
    "call_tool": TOOL_RESULTS, "call_tools": TOOL_RESULTS, "event": INJECTED,
    "load": REGISTRATIONS, "reload": REGISTRATIONS, "list_tools": REGISTRATIONS, "rpc": WIRE,
    "http": WIRE, "shutdown": PROCESSES, "introspect": PROCESSES, "server": PROCESSES}
#: where an effect goes, by kind; ``None``: never compared (``stderr`` is the bridge's log)
EFFECT: Mapping[str, str | None] = {
    "tool_registered": REGISTRATIONS, "command_registered": REGISTRATIONS,
    "message": INJECTED, "user_message": INJECTED, "injected": INJECTED, "error": ERRORS,
    "exec": PROCESSES, "notify": UI, "stderr": None}
#: the journal records that are process facts (the rest is the wire)
PROCESS_RECORDS: frozenset[str] = frozenset({"process_start", "process_exit", "signal",
                                             "helper_run"})
#: the effect kinds whose only channel is the UI (masked unless ``--include-ui``)
UI_ONLY_EFFECTS: frozenset[str] = frozenset(k for k, c in EFFECT.items() if c == UI)


def result_category(op: str) -> str:
    return OP_RESULT.get(op, OTHER)


def effect_category(kind: str) -> str | None:
    """Unknown kinds (a host's own) count as :data:`OTHER`: compared, never dropped."""
    return EFFECT.get(kind, OTHER)


def check_category(pointer: str, expected: Any, ops: Mapping[int, str]) -> str:
    """The category of what a check judges, from its pointer in the scenario file
    (``/steps/3/expect/error/kind``, ``/expect/journal/0``), its expectation (an effects check
    names the effect kind it matches, a journal check the record kind) and the op of each step
    by index."""
    parts = pointer.strip("/").split("/")
    op = ""
    if parts[0] == "steps" and len(parts) > 1 and parts[1].isdigit():
        op = ops.get(int(parts[1]), "")
        parts = parts[2:]
        if not parts:
            return ERRORS  # the op itself completed, or not
    if parts and parts[0] == "expect":
        parts = parts[1:]
    head = parts[0] if parts else ""
    if head in ("ok", "error"):
        return ERRORS
    if head == "result":
        return result_category(op)
    match = expected.get("match") if isinstance(expected, Mapping) else None
    kind = match.get("kind") if isinstance(match, Mapping) else None
    if head == "journal":
        return PROCESSES if kind in PROCESS_RECORDS else WIRE
    if head == "wire_secrets":
        return WIRE
    if head == "processes":
        return PROCESSES
    if head == "tools":
        return REGISTRATIONS
    if head == "effects":
        if isinstance(kind, str):
            return effect_category(kind) or OTHER
        return INJECTED if isinstance(match, Mapping) and "custom_type" in match else OTHER
    return OTHER
