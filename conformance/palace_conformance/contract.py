"""The driver protocol's vocabulary (DRIVER.md), defined once for the runner, the hosts and the
judge: the protocol version, transports, capabilities, error and effect kinds, the custom message
types the seed's bridge uses, the runner's default deadline for one op, and where a ``call_tools``
reply holds its outcomes.

Import-free on purpose: the command modules read it without loading any engine. A test keeps these
in step with ``fixtures/schema/scenario.schema.json`` and DRIVER.md.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING, unimported: pyproject.toml's helper-start contracts

if TYPE_CHECKING:
    from typing import Any, Final

#: ``hello.result.protocol``; a host with another major version is refused
DRIVER_PROTOCOL: Final = 1

#: the transports a scenario runs on, in report order
TRANSPORTS: Final = ("stdio", "http")

#: what ``hello`` may declare; a scenario requiring an undeclared one is *not applicable*
CAPABILITIES: Final = ("stdio", "http", "wakeup", "feeding", "diary_command", "provenance",
                       "mailbox", "session_preamble", "keepalive", "cli", "helper_group_kill",
                       "result_parts")
#: capabilities of the harness a host plays, not of the bridge: no observation can show them and
#: no profile claims them, so they are always the host's ``hello`` word (``result_parts``: a tool
#: result reaches the agent as its content parts, apart; an OpenCode tool result is one string)
HARNESS_CAPABILITIES: Final = ("result_parts",)
#: bridge capabilities a scenario needs only where it ``requires`` them: a bridge without one
#: registers and does what the seed does everywhere else (``cli``: a command-line program of
#: its own; ``helper_group_kill``: a killed helper's process group dies with it, pi's exec
#: signals the program alone), so its other results are still judged on the whole trace
LOCAL_CAPABILITIES: Final = ("cli", "helper_group_kill")
#: ``hello``'s ``capabilities_source`` for a placeholder list (a host that does not know its
#: bridge): the runner detects the capabilities instead (DRIVER.md, "Capabilities")
CAPABILITIES_PLACEHOLDER: Final = "default"

#: the kinds a host maps its bridge's failures onto (DRIVER.md, "Error kinds")
ERROR_KINDS: Final = ("timeout", "unavailable", "connection_closed", "tool_error", "auth",
                      "session_lost", "http_error", "protocol", "no_such_tool", "no_such_command",
                      "bad_request", "host_timeout", "exception")
#: error kinds that speak of the host or the runner, never of the bridge
HOST_ERROR_KINDS: Final = frozenset({"host_timeout", "bad_request"})
#: ops only the host carries out (a settle is its wait: no bridge failure can end it), so any
#: ``ok: false`` is the host's: the step's window was not kept and fails whatever its kind
HOST_ONLY_OPS: Final = frozenset({"settle"})

# Why the runner could not drive a host any further (a step's error kind then, never a host's):
PROTOCOL_VIOLATION: Final = "protocol_violation"  # a non-JSON stdout line, a reply without ok, ...
PROTOCOL_VERSION: Final = "protocol_version"  # hello named another major protocol version
HOST_EXITED: Final = "host_exited"
HOST_DEADLINE: Final = "host_deadline"  # no reply even after the host's own deadline and slack
HOST_START: Final = "host_start"  # the host command could not be started

#: the ``cli`` op (DRIVER.md, "Ops"): the capability a host declares when its bridge has a
#: command-line program it can run, and the most text one stream of a run keeps
CLI_CAPABILITY: Final = "cli"
CLI_OUTPUT_LIMIT: Final = 1024 * 1024

#: how many calls one ``call_tools`` op carries (DRIVER.md, "Ops")
CALL_TOOLS_MIN: Final = 2
CALL_TOOLS_MAX: Final = 8


def call_outcomes(result: Any) -> list[Any] | None:
    """A ``call_tools`` reply's outcomes, one per call in request order (``result.calls``), or
    None when the reply holds no such list; each outcome is still untrusted."""
    calls = result.get("calls") if isinstance(result, dict) else None
    return calls if isinstance(calls, list) else None

#: what a host records as a bridge's host-visible side effects (DRIVER.md, "Effects")
EFFECT_KINDS: Final = ("tool_registered", "command_registered", "message", "user_message",
                       "injected", "exec", "stderr", "notify", "error")

#: the ``custom_type`` of the seed bridge's wake-up and owed-events messages
WAKEUP_TYPE: Final = "mempalace-wakeup"
MAILBOX_TYPE: Final = "mempalace-mailbox"

#: the runner's deadline for one op when a step sets none (a host's own default is 30000)
DEFAULT_OP_TIMEOUT_MS: Final = 15000

#: the pi transcript stand-in (``standins/feed_session.py``): its program name, the modes a plan
#: step may name and the keys a step (or a fake preset's ``standins`` entry) may set; the fake's
#: presets check their ``standins`` entries against these
FEED_SESSION_PROGRAM: Final = "mempalace-pi-session"
FEED_SESSION_MODES: Final = ("source", "none", "hang", "fail")
FEED_SESSION_STEP_KEYS: Final = ("mode", "delay_ms", "exit")


#: the options ``palace-conformance run`` and the pytest plugin share, each defined once (its
#: argparse keywords): ``run`` spells them ``--NAME``, the plugin ``--palace-NAME`` (pytest's
#: options are one namespace, so the plugin's are prefixed)
SHARED_RUN_OPTIONS: dict[str, dict[str, Any]] = {
    "transport": {"choices": (*TRANSPORTS, "both"), "default": "both",
                  "help": "which transports to run (default both)"},
    "select": {"action": "append", "default": [], "metavar": "PATTERN",
               "help": "only scenario ids matching this glob (e.g. 'stdio.*'); repeatable"},
    "op-timeout-ms": {"type": int, "default": DEFAULT_OP_TIMEOUT_MS, "metavar": "MS",
                      "help": "an op's deadline when its step sets no timeout_ms "
                      f"(default {DEFAULT_OP_TIMEOUT_MS})"},
    "level": {"choices": ("core", "seed"), "default": None,
              "help": "judge what any MemPalace bridge must do (core), or that plus the seed "
              "bridge's conventions (seed); default: seed for the reference bridge or a "
              "profile that is a copy of the seed, core for any other (docs/profiles.md)"},
    "baseline": {"metavar": "FILE", "default": None,
                 "help": "expected-failure baseline (docs/baselines.md): listed failures pass "
                 "as known; stale, unknown or expired entries fail the run"},
}
