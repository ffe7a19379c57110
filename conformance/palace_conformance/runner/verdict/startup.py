"""The bridge's own start-up words, quoted once at the top of a run's reports.

When a bridge's palace tools are missing, or it never reached the fake on a transport, every
failing result says the same thing in the kit's words ("missing [...]", "never reached"). What
the bridge itself said at start-up ("Incompatible MemPalace 3.11.0", "no settings file") and
what to do next are the first things its author needs, so the reports put them in one line at
the top: with or without a profile (a profile that claims capabilities skips the observation
whose note says it otherwise). The quote is the same as a not-testable line's
(:func:`.reach.diagnostics`): the last stderr and notify lines, else the host's stderr tail.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from palace_conformance.runner.results import FAILED, ScenarioResult
from palace_conformance.runner.verdict.reach import NOTHING_SAID, UNREACHED_ID, diagnostics

_NAMES_SHOWN = 4
#: how a result's ``/profile`` note names the extra tools its profile set aside
EXTRA_TOOLS_NOTE = "extra tools, allowed by the profile: "
#: the check pointers whose failure means palace tools the scenario wants are not registered
_TOOL_CHECKS = ("/tools/registered", "/tools/includes")


def _missing_tools(result: ScenarioResult) -> bool:
    return result.status == FAILED and any(
        check.pointer.endswith(_TOOL_CHECKS) and "missing [" in check.message
        and "missing []" not in check.message for check in result.failures)


def _own_tools(results: Sequence[ScenarioResult], catalogue: Collection[str]) -> list[str]:
    """Tool names the bridge registered that are not catalogue names, first seen first (a
    profile's extras, set aside from the effects, from its note)."""
    names: dict[str, None] = {}
    for result in results:
        for check in result.checks:
            if check.pointer == "/profile" and check.message.startswith(EXTRA_TOOLS_NOTE):
                for extra in check.message[len(EXTRA_TOOLS_NOTE):].split(", "):
                    names.setdefault(extra)
        for step in result.steps:
            for effect in step.effects:
                name = effect.get("name")
                if (effect.get("kind") == "tool_registered" and isinstance(name, str)
                        and name not in catalogue):
                    names.setdefault(name)
    return list(names)


def _quoted(names: Sequence[str]) -> str:
    shown = ", ".join(f"`{n}`" for n in names[:_NAMES_SHOWN])
    more = len(names) - _NAMES_SHOWN
    return shown + (f" and {more} more" if more > 0 else "")


def startup_note(results: Sequence[ScenarioResult], before_collapse: Sequence[ScenarioResult],
                 catalogue: Collection[str], profiled: bool, already: str = "") -> str:
    """One line for the top of the reports, or "" when the bridge's tools were there and every
    transport reached. ``results`` are the run's results, ``before_collapse`` the same before
    each unreached transport became one line (they still hold the steps to quote from);
    ``profiled``: a profile was given (the next step names its fields rather than a new one);
    ``already``: a line the reports print anyway (the observation's note): a quote it holds is
    not repeated."""
    unreached = sorted({r.transport for r in results if r.scenario == UNREACHED_ID})
    missing = [r for r in results if _missing_tools(r)]
    if not unreached and not missing:
        return ""
    sources = ([r for r in before_collapse if r.transport in unreached and r.steps]
               if unreached else missing)
    said = next((q for q in (diagnostics(r.steps, r.host_stderr) for r in sources)
                 if q != NOTHING_SAID), NOTHING_SAID)
    if said != NOTHING_SAID and f"it said: {said}" in already:
        return ""
    where = "its profile's" if profiled else "a profile's"
    if unreached:
        what = f"the bridge never reached the fake palace over {' and '.join(unreached)}"
        step = (f"check how it starts its palace and give it what it needs in {where} "
                "path_programs, files or knobs (docs/profiles.md)")
    else:
        own = _own_tools(missing, catalogue)
        what = (f"palace tools missing in {len(missing)} result(s)"
                + (f"; your bridge registers {_quoted(own)}" if own
                   else "; it registered no palace tool"))
        step = (f"map its tools onto catalogue tools in {where} tools.map (palace-conformance "
                "profile init drafts it)" if own
                else "check that it can start mempalace-mcp from PATH, as the run provides it")
    words = f"it said: {said}" if said != NOTHING_SAID else "it printed nothing"
    return f"start-up: {what}; {words}; next: {step}"
