"""A bridge profile applied at the edges of a run, so the same scenarios judge every bridge.

Going in: the scenario's knobs in the bridge's own names (or the reason the scenario cannot be
given to this bridge), the settings files it reads, the extra program names it spawns, and the
bridge's own name for each catalogue tool a step calls. Coming back: tool names turned back into
catalogue names, extra tools the profile allows set aside (and reported), a wake-up put into the
system prompt shown as the injected message the scenarios look for, and diagnostics sent through
``notify`` shown as the stderr lines they look for. Nothing here judges: it only translates.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from typing import Any

from palace_conformance.contract import WAKEUP_TYPE
from palace_conformance.resources import tool_catalogue
from palace_conformance.runner.execution.world import REMOTE_TOKEN, REMOTE_URL, SetupError, World
from palace_conformance.runner.profile import Profile, ProfileError
from palace_conformance.scenarios import paths
from palace_conformance.scenarios.model import Check, Scenario

#: notify levels that carry a diagnostic (info is a UI toast)
_DIAGNOSTIC_LEVELS = ("warning", "error")


def _catalogue_names() -> set[str]:
    return {tool["name"] for tool in tool_catalogue()["tools"]}


def offered_catalogue(profile: Profile) -> list[dict[str, Any]] | None:
    """What ``"catalogue"`` in a tools expectation stands for with this bridge: the catalogue
    tools its profile maps (in catalogue order), or None (the whole catalogue) without a map.

    A curated bridge offers a chosen set; "every palace tool, with its schema" then means every
    tool of that set, each with the catalogue's schema."""
    if not profile.tool_map:
        return None
    offered = set(profile.tool_map.values())
    return [tool for tool in tool_catalogue()["tools"] if tool["name"] in offered]


def inapplicable(profile: Profile, scenario: Scenario, transport: str) -> str | None:
    """Why this scenario cannot judge a bridge with this profile, before anything runs."""
    if not profile.tool_map:
        return None
    offered = set(profile.tool_map.values())
    catalogue = _catalogue_names()
    for step in scenario.steps_for(transport):
        for name in step.tool_names:
            if name not in offered and name in catalogue:
                return (f"the bridge offers no tool for {name} (its profile maps a curated "
                        "tool set)")
    expectations = [s.expect.tools for s in scenario.steps_for(transport) if s.expect is not None]
    expectations.append(scenario.expect.tools)
    for tools in expectations:
        if tools is None:
            continue
        named = list(tools.includes)
        if isinstance(tools.registered, tuple):
            named += tools.registered
        missing = sorted({n for n in named if n in catalogue and n not in offered})
        if missing:
            return (f"it expects {', '.join(missing)} registered, which the bridge does not "
                    "offer (its profile maps a curated tool set)")
    checks = [c for s in scenario.steps_for(transport) if s.expect is not None
              for c in s.expect.effects]
    checks += scenario.expect.effects
    if any(_counts_every_registration(c) for c in checks if c.applies_to(transport)):
        return ("it counts the registrations of the whole catalogue, and the bridge's profile "
                "maps a curated tool set")
    return None


def _counts_every_registration(check: Check) -> bool:
    """An upper-bounded count of every ``tool_registered`` effect: the catalogue's size."""
    if check.kind != "count" or check.raw.get("match") != {"kind": "tool_registered"}:
        return False
    return check.bounds.equals is not None or check.bounds.at_most is not None


def prepare(profile: Profile, world: World) -> str | None:
    """Knobs, files and programs for the bridge; the reason the scenario cannot run, or None;
    :class:`SetupError` when a file the profile names is refused by the path policy."""
    for name, knob in profile.knobs.items():  # a profile built past the loader
        why = paths.reserved_env_problem(knob.env) if knob.env is not None else None
        if why:
            raise SetupError(f"refused by the path policy: the profile's knob {name}: {why}")
    own = {name: value for name, value in world.scenario.env.items() if value is not None}
    env, why = profile.translate_env(world.env, own=own)
    if why is not None:
        return why
    world.env = env
    values = {"FAKE_URL": env.get(REMOTE_URL, ""), "FAKE_TOKEN": env.get(REMOTE_TOKEN, "")}
    scoped, _ = profile.translate_env(own, own=own)  # ${ENV:NAME}: the scenario's own only
    try:
        for path, data, mode in profile.files_for(home=world.home, cwd=world.root,
                                                  tmp=world.root, remote=bool(env.get(REMOTE_URL)),
                                                  values=values, env=scoped):
            in_home = path.is_relative_to(world.home)
            base = world.home if in_home else world.root
            paths.write_untrusted(base, path.relative_to(base).as_posix(), data, mode,
                                  paths.RESERVED_IN_HOME if in_home else paths.RESERVED_IN_RUN)
    except (ProfileError, paths.PathEscape) as exc:
        raise SetupError(f"refused by the path policy: {exc}") from None
    shim = world.bin / "mempalace-mcp"
    if shim.exists():
        for name in profile.path_programs:
            target = world.bin / name
            if not target.exists():
                shutil.copy2(shim, target)
    return None


def outgoing_tool(profile: Profile, name: str) -> str:
    """The bridge's name for a catalogue tool a step calls."""
    for own, catalogue in profile.tool_map.items():
        if catalogue == name:
            return own
    return name


def outgoing_request(profile: Profile, op: str, request: dict[str, Any]) -> dict[str, Any]:
    """A driver request with every tool it calls in the bridge's names: a ``call_tool``'s
    ``name``, each call of a ``call_tools``; any other op's request unchanged."""
    if op == "call_tool" and isinstance(request.get("name"), str):
        return {**request, "name": outgoing_tool(profile, request["name"])}
    if op == "call_tools" and isinstance(request.get("calls"), list):
        return {**request, "calls": [
            {**call, "name": outgoing_tool(profile, call["name"])}
            if isinstance(call, dict) and isinstance(call.get("name"), str) else call
            for call in request["calls"]]}
    return request


def incoming_tools(profile: Profile,
                   tools: Iterable[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """Registered tools in catalogue names, and the extra tools the profile allows (set aside)."""
    shown: list[dict[str, Any]] = []
    extras: list[str] = []
    known = _catalogue_names()
    for tool in tools:
        name = tool.get("name")
        mapped = profile.tool_map.get(name, name) if isinstance(name, str) else name
        if profile.extra_tools_allowed and isinstance(mapped, str) and mapped not in known:
            extras.append(mapped)
            continue
        shown.append({**tool, "name": mapped})
    return shown, extras


def incoming_effects(profile: Profile, effects: list[dict[str, Any]],
                     system_prompt: tuple[str, str] | None = None) -> list[dict[str, Any]]:
    """Effects as the scenarios name them: tool names mapped, extra tools set aside, a system
    prompt wake-up as an injected message, notify diagnostics as stderr lines."""
    out: list[dict[str, Any]] = []
    known = _catalogue_names()
    for effect in effects:
        kind = effect.get("kind")
        if kind == "tool_registered" and isinstance(effect.get("name"), str):
            mapped = profile.tool_map.get(effect["name"], effect["name"])
            if profile.extra_tools_allowed and mapped not in known:
                continue
            effect = {**effect, "name": mapped}
        elif (kind == "notify" and profile.diagnostics_channel == "notify"
              and effect.get("level") in _DIAGNOSTIC_LEVELS):
            out.append(effect)
            effect = {"kind": "stderr", "line": str(effect.get("message", "")),
                      "via": "notify"}
        out.append(effect)
    if system_prompt is not None and profile.wakeup_channel == "system_prompt":
        before, after = system_prompt
        added = after[len(before):] if after.startswith(before) else after
        if added.strip():
            out.append({"kind": "injected", "custom_type": WAKEUP_TYPE, "content": added.strip(),
                        "via": "system_prompt"})
    return out
