"""A bridge profile applied at the edges of a run, so the same scenarios judge every bridge.

Going in: the scenario's knobs in the bridge's own names (or the reason the scenario cannot be
given to this bridge), the settings files it reads, the extra program names it spawns, and the
bridge's own name for each catalogue tool a step calls. Coming back: tool names turned back into
catalogue names, extra tools the profile allows set aside (and reported), a wake-up put into the
system prompt shown as the injected message the scenarios look for, and diagnostics sent through
``notify`` shown as the stderr lines they look for. Nothing here judges: it only translates.
"""

from __future__ import annotations

import copy
import json
import math
import shutil
from collections.abc import Iterable, Mapping
from typing import Any

from palace_conformance.contract import WAKEUP_TYPE, call_outcomes
from palace_conformance.fake.options import ENV_FAULTS_FOR
from palace_conformance.json_pointer import unescape
from palace_conformance.resources import tool_catalogue
from palace_conformance.runner.execution.world import REMOTE_TOKEN, REMOTE_URL, SetupError, World
from palace_conformance.runner.profile import Profile, ProfileError, ToolRoute
from palace_conformance.runner.results import StepRecord
from palace_conformance.scenarios import paths
from palace_conformance.scenarios.model import Check, Scenario

#: notify levels that carry a diagnostic (info is a UI toast)
_DIAGNOSTIC_LEVELS = ("warning", "error")


def _catalogue_names() -> set[str]:
    return {tool["name"] for tool in tool_catalogue()["tools"]}


def _offered(profile: Profile) -> set[str]:
    return {route.tool for route in profile.tool_routes}


def offered_catalogue(profile: Profile) -> list[dict[str, Any]] | None:
    """What ``"catalogue"`` in a tools expectation stands for with this bridge: the catalogue
    tools its profile maps (in catalogue order), or None (the whole catalogue) without a map.

    A curated bridge offers a chosen set; "every palace tool, with its schema" then means every
    tool of that set, each with the catalogue's schema."""
    if not profile.tool_routes:
        return None
    offered = _offered(profile)
    return [tool for tool in tool_catalogue()["tools"] if tool["name"] in offered]


def inapplicable(profile: Profile, scenario: Scenario, transport: str) -> str | None:
    """Why this scenario cannot judge a bridge with this profile, before anything runs."""
    return adapt(profile, scenario, transport)[1]


def adapt(profile: Profile, scenario: Scenario, transport: str) -> tuple[Scenario, str | None]:
    """The scenario as this bridge can be given it, or the reason it cannot be (:func:`edited`,
    built)."""
    raw, why = edited(profile, scenario, transport)
    if why is not None:
        return scenario, why
    if raw is not None:
        scenario = Scenario.from_json(raw, scenario.path)
    return scenario, unoffered(profile, scenario, transport)


def edited(profile: Profile, scenario: Scenario,
           transport: str) -> tuple[dict[str, Any] | None, str | None]:
    """The scenario's data as this bridge can be given it (None: as written), or the reason it
    cannot be; left unbuilt so that pace.py edits the same data and the run builds it once.

    A curated bridge offers some catalogue tools: a call of another one that is only *a* palace
    call (its name appears nowhere else: no fault, journal check or result expectation names
    it) becomes a call of an argument-free read tool the bridge offers; only a scenario that
    needs the unmapped tool itself is not applicable (:func:`unoffered`, on the built scenario).
    A bridge with static tools never lists: its registration stands for "none" while the palace
    is down, and journal checks on ``tools/list`` are dropped."""
    per_call = _per_call(profile, scenario, transport)
    raw: dict[str, Any] = per_call if per_call is not None else copy.deepcopy(dict(scenario.raw))
    changed = per_call is not None
    changed = bool(profile.read_retry and _faults_after_retries(raw)) or changed
    if profile.tool_routes:
        changed = _substitute_incidental_calls(raw, _offered(profile)) or changed
        if profile.static_tools:
            why = _static_tools(raw, sorted(_offered(profile)))
            if why is not None:
                return None, why
            changed = True
    return (raw if changed else None), None


#: the behaviours of a respawn budget spent across calls (the cap, and 0 as a latch)
_SESSION_BUDGET = ("STDIO-06", "STDIO-08")
MAX_RESPAWNS = "MEMPALACE_MCP_MAX_RESPAWNS"
BACKOFF = "MEMPALACE_MCP_RESPAWN_BACKOFF_MS"
#: the seed's defaults, when neither the scenario nor the profile says
SEED_MAX_RESPAWNS = 2
SEED_BACKOFF_MS = 1000
#: one start of a child on a loaded machine, and a derived window's slack (as in pace.py)
_START_MS = 1000
_SLACK_FRACTION = 0.25
_SLACK_MS = 1000


def _budget(profile: Profile, scenario: Scenario, name: str, default: int) -> int:
    """What the bridge is given for a count or delay: its fixed value, 0 when absent, else the
    scenario's value, else the seed's default."""
    knob = profile.knobs.get(name)
    if knob is not None and knob.absent:
        return 0
    if knob is not None and isinstance(knob.fixed, int):
        return knob.fixed
    given = scenario.env.get(name)
    return int(given) if isinstance(given, str) and given.isdigit() else default


def _per_call(profile: Profile, scenario: Scenario, transport: str) -> dict[str, Any] | None:
    """The data of a scenario that counts a session-wide respawn budget, for a bridge whose
    budget is per call (``claims.respawn_budget: "call"``): judged on the per-call rule instead
    (None: not such a scenario).

    Nothing latches, so a call the seed fails at once as ``unavailable`` (the budget spent) may
    spend a budget of its own: it must fail, and start at most ``b`` children. Every call, the
    others too, starts at most ``b`` children (a call that starts more has exceeded the budget);
    the scenario's counts that follow the budget (``budget_counts``) are floors, not exact; and
    the waits a call's own respawns add (``b`` doubling backoffs and starts) widen its windows."""
    if profile.respawn_budget != "call" or not set(scenario.covers) & set(_SESSION_BUDGET):
        return None
    steps = scenario.steps_for(transport)
    if not any(step.expect is not None and step.expect.error is not None
               and step.expect.error.kind == "unavailable" for step in steps):
        return None
    budget = _budget(profile, scenario, MAX_RESPAWNS, SEED_MAX_RESPAWNS)
    backoff = _budget(profile, scenario, BACKOFF, SEED_BACKOFF_MS)
    waits = sum(backoff * 2 ** k + _START_MS for k in range(budget))
    widen = math.ceil(waits * (1 + _SLACK_FRACTION)) + _SLACK_MS
    raw: dict[str, Any] = copy.deepcopy(dict(scenario.raw))
    at_most = {"check": "count", "match": {"kind": "process_start"}, "at_most": budget,
               "comment": "a per-call respawn budget (claims.respawn_budget)"}
    for step in raw.get("steps", ()):
        if not isinstance(step, dict) or step.get("op") not in ("call_tool", "call_tools"):
            continue
        expect = step.setdefault("expect", {})
        error = expect.get("error")
        if isinstance(error, dict) and error.get("kind") == "unavailable":
            del expect["error"]
            expect["ok"] = False
            timing = expect.get("elapsed_ms")
            if isinstance(timing, dict) and "slack_ms" in timing:
                timing["slack_ms"] = int(timing["slack_ms"]) + widen
            if isinstance(step.get("timeout_ms"), int):
                step["timeout_ms"] += widen
            expect["journal"] = [c for c in expect.get("journal", ()) if not (
                isinstance(c, dict) and c.get("check") == "absent"
                and c.get("match") == {"kind": "process_start"})]
        expect.setdefault("journal", []).append(dict(at_most))
    for pointer in (raw.get("budget_counts") or {}).get(MAX_RESPAWNS, ()):
        _floor(raw, pointer)
    return raw


def _floor(raw: dict[str, Any], pointer: str) -> None:
    """The exact count at ``pointer`` (a check's ``equals``, a ``processes.spawned``) made a
    floor: a per-call budget starts at least the children a session's does."""
    *parents, last = [unescape(t) for t in pointer.split("/")[1:]]
    node: Any = raw
    for token in parents:
        node = node[int(token)] if isinstance(node, list) else node[token]
    if last == "equals" and isinstance(node, dict):
        node["at_least"] = node.pop("equals")
    elif isinstance(node, dict) and isinstance(node.get(last), int):
        node[last] = {"at_least": node[last]}


def unoffered(profile: Profile, scenario: Scenario, transport: str) -> str | None:
    """Why a curated bridge cannot be given this (edited, built) scenario: it needs a tool the
    bridge does not offer; None for a bridge that maps no tool set."""
    if not profile.tool_routes:
        return None
    offered = _offered(profile)
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


def _keep_checks(expect: dict[str, Any], key: str, kept: list[Any]) -> None:
    """Set ``expect[key]`` to the checks of ``kept`` that are not None (None: dropped), and
    renumber what points into the list (``seed_only``, ``cites``), so a check keeps its level
    and its citations after a dropped one before it; a pointer at a dropped check goes too."""
    index: dict[int, int] = {}
    for old, check in enumerate(kept):
        if check is not None:
            index[old] = len(index)
    expect[key] = [c for c in kept if c is not None]
    prefix = f"/{key}/"

    def moved(pointer: str) -> str | None:
        if not pointer.startswith(prefix):
            return pointer
        head, _, rest = pointer[len(prefix):].partition("/")
        if not head.isdigit():
            return pointer
        if int(head) not in index:
            return None
        return f"{prefix}{index[int(head)]}" + (f"/{rest}" if rest else "")

    seed_only = expect.get("seed_only")
    if isinstance(seed_only, list):
        expect["seed_only"] = [p for p in (moved(p) if isinstance(p, str) else p
                                           for p in seed_only) if p is not None]
    cites = expect.get("cites")
    if isinstance(cites, dict):
        expect["cites"] = {new: cited for new, cited in ((moved(p), c) for p, c in cites.items())
                           if new is not None}


def _calls(raw: Mapping[str, Any]) -> list[tuple[dict[str, Any], Any]]:
    """Every call a scenario makes: (the call, its expectation)."""
    out: list[tuple[dict[str, Any], Any]] = []
    for step in raw.get("steps", ()):
        if not isinstance(step, dict):
            continue
        expect: Any = step.get("expect") if isinstance(step.get("expect"), dict) else {}
        if step.get("op") == "call_tool":
            out.append((step, expect))
        elif step.get("op") == "call_tools" and isinstance(step.get("calls"), list):
            each: list[Any] = expect.get("calls") or [] if isinstance(expect, dict) else []
            for index, call in enumerate(step["calls"]):
                if isinstance(call, dict):
                    out.append((call, each[index] if index < len(each) else {}))
    return out


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _substitute_incidental_calls(raw: dict[str, Any], offered: set[str]) -> bool:
    """Rename, all through the scenario, each unoffered read-only catalogue tool it calls with no
    arguments and whose results it does not look into (only ``is_error``) to an offered
    read-only tool it does not name (its required string arguments given a word): a scenario
    about sessions, faults or timing needs *a* palace read, not that one. Whether any was."""
    catalogue = {tool["name"]: tool for tool in tool_catalogue()["tools"]}

    def read_only(name: str) -> bool:
        return bool((catalogue[name].get("annotations") or {}).get("readOnlyHint"))

    def plain(name: str) -> bool:  # every required argument a string we can make up
        schema = catalogue[name]["inputSchema"]
        return all((schema.get("properties", {}).get(r) or {}).get("type") == "string"
                   for r in schema.get("required", ()))

    named = set(_strings(raw))
    stand_ins = [name for name in catalogue if name in offered and name not in named
                 and read_only(name) and plain(name)]
    calls = _calls(raw)
    wanted = sorted({str(c.get("name")) for c, _ in calls} - offered)
    renames: dict[str, str] = {}
    for name in wanted:
        if name not in catalogue or not read_only(name) or not stand_ins:
            continue
        if all(not c.get("args") and (not isinstance(e, dict)
                                      or set(e.get("result") or {}) <= {"is_error"})
               for c, e in calls if c.get("name") == name):
            renames[name] = stand_ins.pop(0)
    if not renames:
        return False
    for call, _ in calls:
        if call.get("name") in renames:
            call["name"] = renames[call["name"]]
            schema = catalogue[call["name"]]["inputSchema"]
            call["args"] = {r: "conformance" for r in schema.get("required", ())}
    _rename_strings(raw, renames)
    return True


def _rename_strings(value: Any, renames: Mapping[str, str]) -> None:
    """Every string value equal to a renamed tool, renamed (faults, journal checks), in place."""
    items: Iterable[tuple[Any, Any]] = (value.items() if isinstance(value, dict)
                                        else enumerate(value) if isinstance(value, list) else ())
    for key, item in list(items):
        if isinstance(item, str) and item in renames:
            value[key] = renames[item]
        else:
            _rename_strings(item, renames)


def _static_tools(raw: dict[str, Any], offered: list[str]) -> str | None:
    """Rewrite for a bridge that registers its tools at load and never lists them; or why the
    scenario cannot judge such a bridge (its faults aim at ``tools/list``)."""
    for fault in raw.get("faults", ()):
        on = fault.get("on") if isinstance(fault, dict) else None
        if isinstance(on, dict) and on.get("method") == "tools/list":
            return ("its faults aim at tools/list, which a bridge with static tools (its "
                    "profile's tools.static) never sends")

    def lists(match: Any) -> bool:
        return isinstance(match, dict) and match.get("method") == "tools/list"

    def rewrite(expect: Any) -> None:
        if not isinstance(expect, dict):
            return
        tools = expect.get("tools")
        if isinstance(tools, dict) and tools.get("registered") == "none":
            tools["registered"] = list(offered)
        error = expect.get("error")
        if isinstance(error, dict) and error.get("kind") == "no_such_tool":
            del error["kind"]  # the tool is there; the call fails for want of a palace
        effects = expect.get("effects")
        if isinstance(effects, list):
            _keep_checks(expect, "effects", [c if not (
                isinstance(c, dict) and c.get("check") == "absent"
                and c.get("match") == {"kind": "tool_registered"}) else None for c in effects])
        journal = expect.get("journal")
        if isinstance(journal, list):
            kept: list[Any] = []
            for check in journal:
                if not isinstance(check, dict):
                    kept.append(check)
                elif check.get("check") == "sequence":
                    items = [i for i in check.get("items", ()) if not lists(i)]
                    kept.append({**check, "items": items} if items else None)
                elif not any(lists(check.get(key)) for key in ("match", "first", "then",
                                                                 "from", "to")):
                    kept.append(check)
                else:
                    kept.append(None)
            _keep_checks(expect, "journal", kept)

    rewrite(raw.get("expect"))
    for step in raw.get("steps", ()):
        if isinstance(step, dict):
            rewrite(step.get("expect"))
    return None


#: fault actions that end the child before it answers the call they hit
_CRASHES = ("exit", "partial_line")


def _faults_after_retries(raw: dict[str, Any]) -> bool:
    """For a bridge that retries a crashed read once (``claims.read_retry``): each retry is one
    more call of that tool, so a later fault aimed at the nth call of a read the scenario crashes
    is moved on by one per crash before it, to hit the call the scenario means. Whether any was."""
    catalogue = {tool["name"]: tool for tool in tool_catalogue()["tools"]}
    crashes: dict[str, list[int]] = {}
    for fault in raw.get("faults", ()):
        on: Any = fault.get("on") if isinstance(fault, dict) else None
        tool = on.get("tool") if isinstance(on, dict) else None
        if (isinstance(on, dict) and isinstance(tool, str) and tool in catalogue
                and fault.get("action") in _CRASHES
                and fault.get("then", "exit") == "exit" and "every" not in on
                and fault.get("times", 1) == 1
                and (catalogue[tool].get("annotations") or {}).get("readOnlyHint")):
            crashes.setdefault(tool, []).append(int(on.get("nth", 1)))
    changed = False
    for fault in raw.get("faults", ()):
        on = fault.get("on") if isinstance(fault, dict) else None
        tool = on.get("tool") if isinstance(on, dict) else None
        if not isinstance(on, dict) or not isinstance(tool, str) or tool not in crashes \
                or "every" in on:
            continue
        nth = int(on.get("nth", 1))
        before = sum(1 for crashed in crashes[tool] if crashed < nth)
        if before:
            on["nth"] = nth + before
            changed = True
    return changed


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
    if any(role != "full" for role in profile.servers):
        world.full_server = profile.servers.get("full", "mempalace-mcp")
        # a light server's fake takes none of the faults, whatever environment its child got
        world.add_fake_settings({ENV_FAULTS_FOR: "full"})
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
    return outgoing_call(profile, name, {})[0]


def outgoing_call(profile: Profile, name: str,
                  args: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """The bridge's tool for a catalogue tool a step calls, and the arguments with the fixed
    ones (``when``) that make it call that catalogue tool."""
    for route in profile.tool_routes:
        if route.tool == name:
            return route.own, {**args, **route.when}
    return name, dict(args)


def outgoing_request(profile: Profile, op: str, request: dict[str, Any]) -> dict[str, Any]:
    """A driver request with every tool it calls in the bridge's names: a ``call_tool``'s
    ``name``, each call of a ``call_tools``; any other op's request unchanged."""

    def one(call: dict[str, Any]) -> dict[str, Any]:
        if not isinstance(call.get("name"), str):
            return call
        args: dict[str, Any] = call["args"] if isinstance(call.get("args"), dict) else {}
        own, sent = outgoing_call(profile, call["name"], args)
        return {**call, "name": own, **({"args": sent} if sent or "args" in call else {})}

    if op == "call_tool":
        return one(request)
    if op == "call_tools" and isinstance(request.get("calls"), list):
        return {**request, "calls": [one(call) if isinstance(call, dict) else call
                                     for call in request["calls"]]}
    return request


def _routes_of(profile: Profile, own: str) -> list[ToolRoute]:
    return [route for route in profile.tool_routes if route.own == own]


def _routed_schema(schema: Any, route: ToolRoute) -> Any:
    """A multiplexing tool's schema as the catalogue tool it stands for: the catalogue's when it
    keeps every parameter of that tool (by name, with the catalogue's type) besides its fixed
    ones; else its own without the fixed ones (and the schema check names it)."""
    if not route.when or not isinstance(schema, dict):
        return schema
    properties: dict[str, Any] = (schema["properties"]
                                  if isinstance(schema.get("properties"), dict) else {})
    own = {k: v for k, v in properties.items() if k not in route.when}
    wanted = next(t["inputSchema"] for t in tool_catalogue()["tools"] if t["name"] == route.tool)
    if all(isinstance(own.get(k), dict) and own[k].get("type") == v.get("type")
           for k, v in wanted.get("properties", {}).items()):
        return wanted
    required = [r for r in schema.get("required", ()) if r not in route.when]
    return {**schema, "properties": own, "required": required}


def incoming_tools(profile: Profile,
                   tools: Iterable[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """Registered tools in catalogue names (a multiplexing tool as each catalogue tool it
    stands for), and the extra tools the profile allows (set aside)."""
    shown: list[dict[str, Any]] = []
    extras: list[str] = []
    known = _catalogue_names()
    for tool in tools:
        name = tool.get("name")
        routes = _routes_of(profile, name) if isinstance(name, str) else []
        if routes:
            for route in routes:
                view = {**tool, "name": route.tool}
                for key in ("parameters", "inputSchema"):
                    if key in tool:
                        view[key] = _routed_schema(tool[key], route)
                shown.append(view)
            continue
        if profile.extra_tools_allowed and isinstance(name, str) and name not in known:
            extras.append(name)
            continue
        shown.append(tool)
    return shown, extras


def incoming_result(profile: Profile, op: str, result: Any) -> Any:
    """A call's result with the palace's JSON in place of the bridge's envelope
    (``results.path``): what the scenarios judge. The envelope stays as ``envelope``, judged as
    what the agent saw (secret checks read it); a result without the envelope is left as is."""
    if profile.results_path is None:
        return result
    if op == "call_tools" and isinstance(result, dict) and isinstance(result.get("calls"), list):
        return {**result, "calls": [
            {**call, "result": _unwrapped(profile.results_path, call.get("result"))}
            if isinstance(call, dict) and "result" in call else call
            for call in result["calls"]]}
    if op == "call_tool":
        return _unwrapped(profile.results_path, result)
    return result


def _unwrapped(pointer: str, result: Any) -> Any:
    content = result.get("content") if isinstance(result, dict) else None
    if not (isinstance(content, list) and content and isinstance(content[0], dict)
            and isinstance(content[0].get("text"), str)):
        return result
    try:
        envelope = json.loads(content[0]["text"])
    except ValueError:
        return result
    inner = envelope
    for token in pointer.split("/")[1:]:
        key = unescape(token)
        if isinstance(inner, dict) and key in inner:
            inner = inner[key]
        elif isinstance(inner, list) and key.isdigit() and int(key) < len(inner):
            inner = inner[int(key)]
        else:
            return result
    text = inner if isinstance(inner, str) else json.dumps(inner)
    return {**result, "content": [{**content[0], "text": text}, *content[1:]],
            "envelope": content[0]["text"]}


def incoming_effects(profile: Profile, effects: list[dict[str, Any]],
                     system_prompt: tuple[str, str] | None = None) -> list[dict[str, Any]]:
    """Effects as the scenarios name them: tool names mapped, extra tools set aside, a system
    prompt wake-up as an injected message, notify diagnostics as stderr lines."""
    out: list[dict[str, Any]] = []
    known = _catalogue_names()
    for effect in effects:
        kind = effect.get("kind")
        if kind == "tool_registered" and isinstance(effect.get("name"), str):
            routes = _routes_of(profile, effect["name"])
            if routes:
                out.extend({**effect, "name": route.tool} for route in routes)
                continue
            if profile.extra_tools_allowed and effect["name"] not in known:
                continue
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


def set_aside_read_retries(profile: Profile, scenario: Scenario, transport: str,
                           steps: list[StepRecord], records: list[dict[str, Any]],
                           offsets: list[int]) -> list[str]:
    """With ``claims.read_retry``: each read a scenario expects to fail as connection closed
    that the bridge retried once on a new child and got answered, shown as the crash it was; a
    ``call_tool`` step, or any call of a ``call_tools`` step.

    The retried request and its answer are taken out of ``records`` and ``offsets`` (in place;
    the step windows are still byte offsets), the call reads as the connection-closed failure,
    and one line per retry says what was set aside. A second retry, a retry on the same child or
    of a write is left as it is, to be judged."""
    if not profile.read_retry:
        return []
    by_index = {record.index: record for record in steps}
    notes: list[str] = []
    for step in scenario.steps_for(transport):
        record = by_index.get(step.index)
        if record is None or step.expect is None:
            continue
        crashed = _crashed_reads(step, record)
        for name, outcome in crashed:
            window = [i for i, at in enumerate(offsets)
                      if record.journal_start <= at < record.journal_end]
            sent = sum(1 for i in window if records[i].get("kind") == "recv"
                       and records[i].get("method") == "tools/call"
                       and records[i].get("tool") == name)
            if sent - step.tool_names.count(name) > sum(1 for n, _ in crashed if n == name):
                continue  # more than one retry per crashed read: judged as it is
            pair = _retry_pair(records, window, name)
            if pair is None:
                continue
            first, retry, aside = pair
            for i in sorted(aside, reverse=True):
                del records[i]
                del offsets[i]
            error = {"kind": "connection_closed",
                     "message": f"connection closed: the child (pid {first.get('pid')}) died "
                                f"mid-call; the bridge retried the read once on a new child "
                                f"(pid {retry.get('pid')}), which answered"}
            if outcome is None:
                record.result, record.ok, record.error = None, False, error
                at = f"step {step.key}"
            else:
                outcome.pop("result", None)
                outcome.update(ok=False, error=error)
                at = f"step {step.key}, call {name}"
            notes.append(f"{at}: the crashed read {name} was retried once on a new child "
                         f"(pid {retry.get('pid')}; claims.read_retry): that request and its "
                         "answer are set aside, the call judged as the connection-closed "
                         "failure it was")
    return notes


def _read_only(name: Any) -> bool:
    catalogue = {tool["name"]: tool for tool in tool_catalogue()["tools"]}
    return (isinstance(name, str) and name in catalogue
            and bool((catalogue[name].get("annotations") or {}).get("readOnlyHint")))


def _crashed_reads(step: Any, record: StepRecord) -> list[tuple[str, dict[str, Any] | None]]:
    """The reads of a step expected to fail as connection closed that came back answered: a
    ``call_tool``'s (outcome None: the record itself) or each such call of a ``call_tools``
    (its outcome in the reply, to rewrite)."""
    def crash(expect: Any) -> bool:
        error = expect.error if expect is not None else None
        return error is not None and getattr(error, "kind", None) == "connection_closed"

    if step.op == "call_tool":
        name = step.params.get("name")
        if record.ok is True and crash(step.expect) and _read_only(name):
            return [(str(name), None)]
        return []
    outcomes = call_outcomes(record.result) if step.op == "call_tools" else None
    calls = step.params.get("calls") or []
    out: list[tuple[str, dict[str, Any] | None]] = []
    for index, expect in enumerate(step.expect.calls):
        call = calls[index] if index < len(calls) and isinstance(calls[index], dict) else {}
        outcome = outcomes[index] if outcomes is not None and index < len(outcomes) else None
        if (isinstance(outcome, dict) and outcome.get("ok") is True and crash(expect)
                and _read_only(call.get("name"))):
            out.append((str(call["name"]), outcome))
    return out


def _retry_pair(records: list[dict[str, Any]], window: list[int], name: str
                ) -> tuple[dict[str, Any], dict[str, Any], list[int]] | None:
    """The first crashed call of ``name`` in the window that was sent once more on a new child,
    and answered there: (the crashed request, the retry, the indexes to set aside)."""
    calls = [i for i in window if records[i].get("kind") == "recv"
             and records[i].get("method") == "tools/call" and records[i].get("tool") == name]
    for position, i in enumerate(calls):
        first = records[i]
        answered = any(records[k].get("kind") == "send" and records[k].get("pid")
                       == first.get("pid") and records[k].get("id") == first.get("id")
                       for k in window if k > i)
        died = [k for k in window if k > i and records[k].get("kind") == "process_exit"
                and records[k].get("pid") == first.get("pid")]
        if answered or not died:
            continue
        retries = [j for j in calls[position + 1:] if j > died[0]
                   and records[j].get("pid") != first.get("pid")]
        if not retries:
            continue
        j = retries[0]
        retry = records[j]
        answer = [k for k in window if k > j and records[k].get("kind") == "send"
                  and records[k].get("pid") == retry.get("pid")
                  and records[k].get("id") == retry.get("id")]
        if not answer:
            continue
        return first, retry, [j, answer[0]]
    return None


def other_servers(profile: Profile, records: list[dict[str, Any]],
                  offsets: list[int] | None = None) -> list[dict[str, Any]]:
    """With ``servers``: the records of the children of every role but the full server, taken
    out of ``records`` (and ``offsets``, in place) and returned, so the scenarios' process and
    initialize counts judge the full server alone. A child is known by its program's name (the
    last part of its ``process_start`` argv[0])."""
    others = {program for role, program in profile.servers.items() if role != "full"}
    if not others:
        return []
    pids = {r.get("pid") for r in records if r.get("kind") == "process_start"
            and isinstance(r.get("argv"), list) and r["argv"]
            and str(r["argv"][0]).rsplit("/", 1)[-1] in others}
    aside = [r for r in records if r.get("pid") in pids]
    for index in range(len(records) - 1, -1, -1):
        if records[index].get("pid") in pids:
            del records[index]
            if offsets is not None:
                del offsets[index]
    return aside


def servers_note(profile: Profile, aside: list[dict[str, Any]], alive: int) -> str:
    """What the other servers' children did, in one line (they are judged for orphans only)."""
    roles = ", ".join(f"{role} ({program})" for role, program in profile.servers.items()
                      if role != "full")
    started = sum(1 for r in aside if r.get("kind") == "process_start")
    initialized = sum(1 for r in aside if r.get("kind") == "recv"
                      and r.get("method") == "initialize")
    return (f"other servers, {roles}: {started} child(ren) started, {initialized} initialize, "
            f"{alive} alive at the end; set aside from the process and initialize counts "
            "(profile servers), judged for orphans only")
