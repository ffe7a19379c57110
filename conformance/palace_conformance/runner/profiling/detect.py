"""Capabilities for a bridge nobody described: watch it once, judge it with what it showed.

A host that does not know its bridge (the extension host given any pi extension) declares every
capability as a placeholder, and says so (hello ``capabilities_source: "default"``, DRIVER.md).
Judged with that list, every wake-up, feeding, diary and mailbox scenario runs and fails against a
bridge that has no such feature: the kit's assumption reported as the bridge's defect. So when no
profile claims capabilities and the host's list is a placeholder, a run observes the bridge once,
with ``profile init``'s own sessions (:mod:`.observe`) and inference
(:func:`.derive.capabilities_of`), and judges with what it saw. A host that declares its list (the
reference host, ``--capabilities``, any driver host without the field) is believed.

What the sessions showed of the bridge's shape is applied too, as a profile would say it
(:func:`observed_edges`): a wake-up put into the system prompt, diagnostics sent through
``notify``, tools of its own beside the catalogue's (set aside, not failed), and its own names
for catalogue tools when it registers no catalogue name at all (judged through the matched map,
said once). The note says what was applied, and quotes the bridge's own start-up words when it
registered no palace tool.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from palace_conformance.contract import CAPABILITIES, TRANSPORTS
from palace_conformance.resources import tool_catalogue
from palace_conformance.runner.execution.execute import RunOptions
from palace_conformance.runner.execution.translation import translation_for
from palace_conformance.runner.profile import Profile
from palace_conformance.runner.profiling.derive import capabilities_of, channels_of, tools_seen
from palace_conformance.runner.profiling.matching import match_tools
from palace_conformance.runner.profiling.observe import Session, observe
from palace_conformance.runner.results import FROM_DEFAULT, NOT_TESTABLE, HostInfo

CLAIM_MORE = "write a profile (palace-conformance profile init) to claim more"
_REASON_MAX = 160


@dataclass(frozen=True)
class Detection:
    """What the run is judged with, and the one line every report prints about it."""

    capabilities: tuple[str, ...]
    note: str
    seconds: float
    #: the observed channels, extras and tool names as a profile (None: nothing to apply)
    edges: Profile | None = None

    def judged_profile(self, given: Profile | None) -> Profile | None:
        """The profile the run judges with: the one given (what it says stands), else what
        observing the bridge showed."""
        return given or self.edges


#: the stand-in source of a profile built from observation (never read from disk)
OBSERVED_SOURCE = Path("<observed by the runner>")
_LIST_MAX = 4  # names quoted in the note before "and N more"


def _names(items: Sequence[str]) -> str:
    shown = [f"`{item}`" for item in items[:_LIST_MAX]]
    more = len(items) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")


def observed_edges(sessions: Sequence[Session], bridge: str = "",
                   catalogue: Sequence[Mapping[str, Any]] | None = None
                   ) -> tuple[Profile | None, list[str]]:
    """The bridge's observed shape as a profile, and what the note says about it.

    Channels as ``profile init`` drafts them; tools: names beyond the catalogue are extras
    (set aside) when the bridge registers catalogue names too, and its own names matched onto
    catalogue tools are the map when it registers none (a first run of a bridge with its own
    names then judges those tools, and says once how to confirm the map)."""
    observed = [s for s in sessions if s.status == "observed"]
    if not observed:
        return None, []
    tools = catalogue if catalogue is not None else tool_catalogue()["tools"]
    names = {str(t["name"]) for t in tools}
    registered, called = tools_seen(observed)
    found = match_tools(registered, tools, called)
    channels = channels_of(observed)
    said: list[str] = []
    tool_map: dict[str, str] = {}
    extras = sorted(set(found.unmatched))
    if any(name in names for name in registered):
        extras = sorted(set(extras) | set(found.mapped))
    elif found.mapped:
        tool_map = dict(sorted(found.mapped.items()))
        pairs = [f"{own}` for `{target}" for own, target in tool_map.items()]
        said.append(f"your bridge registers {_names(pairs)}: judged through that map of its "
                    "own tool names (map them in a profile: palace-conformance profile init "
                    "writes it)")
    if not any(name in names for name in registered) and not tool_map:
        words = next((s.said for s in observed if s.said), "")
        said.append("it registered no palace tool" + (f"; it said: {words}" if words else ""))
    if extras:
        said.append(f"its own tools {_names(extras)} set aside (beyond the catalogue)")
    if channels.get("wakeup") == "system_prompt":
        said.append("its wake-up read from the system prompt")
    if channels.get("diagnostics") == "notify":
        said.append("its notify warnings and errors read as its diagnostics")
    if not (tool_map or extras or channels.get("wakeup") == "system_prompt"
            or channels.get("diagnostics") == "notify"):
        return None, said
    return Profile(name="observed by the runner", entry=bridge, source=OBSERVED_SOURCE,
                   tool_map=tool_map, extra_tools_allowed=bool(extras),
                   wakeup_channel=channels.get("wakeup", "message"),
                   diagnostics_channel=channels.get("diagnostics", "stderr")), said


def _capability_order(capability: str) -> int:
    return CAPABILITIES.index(capability) if capability in CAPABILITIES else len(CAPABILITIES)


def needs_detection(host: HostInfo, profile: Profile | None) -> bool:
    """Whether nobody stated the bridge's capabilities: no profile claims them and the host's
    list is a placeholder (anything else is authoritative)."""
    if translation_for(profile).claimed_capabilities is not None:
        return False
    return host.capabilities_source == FROM_DEFAULT


def _one_line(reason: str) -> str:
    line = (reason.strip().splitlines() or [""])[0]
    return line if len(line) <= _REASON_MAX else line[:_REASON_MAX - 1] + "…"


def judged(sessions: Sequence[Session], watched: Sequence[str], seconds: float) -> Detection:
    """The capabilities to judge with, from the sessions on the ``watched`` transports.

    A bridge that never loaded shows nothing: it is judged on the transports alone, so that
    its failures are reported as failures. One that loaded but reached the fake on neither
    transport keeps them too (a settings file it wants is a profile's business, and an
    unreachable palace is worth seeing fail), with what else it showed."""
    took = f" (observed in {seconds:.1f} s)"
    reach = [t for t in TRANSPORTS if t in watched]
    if not any(s.status == "observed" for s in sessions):
        reasons = {_one_line(s.reason) for s in sessions}
        if len(reasons) == 1:  # the same on every transport: said once
            why = f"{', '.join(s.transport for s in sessions)}: {reasons.pop()}"
        else:
            why = "; ".join(f"{s.transport}: {_one_line(s.reason)}" for s in sessions)
        return Detection(tuple(reach), f"capabilities: observation failed ({why}); judged with "
                         f"what the run can reach: {', '.join(reach)}, no bridge feature; "
                         f"{CLAIM_MORE}{took}", seconds)
    found = capabilities_of(sessions)
    edges, said = observed_edges(sessions)
    # a transport whose session failed (a load over its deadline on a busy machine) showed
    # nothing either way: judged, never set aside as a transport the bridge lacks
    unknown = [s for s in sessions if s.status == NOT_TESTABLE and s.transport not in found]
    if unknown:
        found = sorted({*found, *(s.transport for s in unknown)}, key=_capability_order)
        said.insert(0, "; ".join(f"observation failed on {s.transport} "
                                 f"({_one_line(s.reason)}), so {s.transport} kept"
                                 for s in unknown))
    if said:
        took = f"; {'; '.join(said)}{took}"
    if not any(t in found for t in TRANSPORTS):
        features = [c for c in found if c not in TRANSPORTS]
        kept = tuple(c for c in CAPABILITIES if c in found or c in reach)
        return Detection(kept, "capabilities detected by observation: "
                         f"{', '.join(features) or 'no bridge feature'}; the bridge reached the "
                         f"fake on no transport, so {', '.join(reach)} kept (what the run can "
                         f"reach); {CLAIM_MORE}{took}", seconds, edges)
    return Detection(tuple(found), f"capabilities detected by observation: {', '.join(found)}; "
                     f"{CLAIM_MORE}{took}", seconds, edges)


def detect(host: HostInfo, options: RunOptions, transports: Sequence[str], *,
           watch: Callable[..., list[Session]] = observe,
           clock: Callable[[], float] = time.monotonic) -> Detection:
    """Observe the bridge once per transport the run uses (both at once) and judge."""
    watched = [t for t in transports if t in host.capabilities] or list(transports)
    started = clock()
    sessions = watch(options.host_argv, tool_catalogue()["tools"], transports=watched,
                     op_timeout_ms=options.op_timeout_ms, base=options,
                     follow_stand_in=False)
    failed = [s.transport for s in sessions if s.status == NOT_TESTABLE]
    if failed:
        # once more, with twice the deadline: a session that failed on a saturated machine
        # must not decide which scenarios are judged
        again = {s.transport: s for s in watch(
            options.host_argv, tool_catalogue()["tools"], transports=failed,
            op_timeout_ms=2 * options.op_timeout_ms, base=options, follow_stand_in=False)}
        sessions = [again.get(s.transport, s) for s in sessions]
    return judged(sessions, watched, clock() - started)
