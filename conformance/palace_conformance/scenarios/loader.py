"""Read scenario files: JSON syntax, format version, schema, then the rules a schema cannot state.

Every problem is one line, ``path: [pointer: ]problem (fix)``, so a fixture author fixes a file
without reading a traceback, and a CI log shows every broken file at once.
"""

from __future__ import annotations

import difflib
import io
import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import import_module
from pathlib import Path
from typing import Any

from palace_conformance.errors import UntrustedInputError
from palace_conformance.fake.faults import ACTIONS, FaultPlanError, plan_from_json
from palace_conformance.json_pointer import escape as escape_token
from palace_conformance.resources import fixtures_dir, tool_catalogue
from palace_conformance.scenarios import matching, paths, placeholders
from palace_conformance.scenarios.behaviours import Behaviour, load_behaviours
from palace_conformance.scenarios.cache import ValidationCache, cache_dir, fingerprint
from palace_conformance.scenarios.checks import resolve_pointer
from palace_conformance.scenarios.matching import MISSING
from palace_conformance.scenarios.model import AREAS, PLACEHOLDERS, SCHEMA_VERSION, Scenario
from palace_conformance.scenarios.palace_state import LABEL, event_id_references
from palace_conformance.scenarios.schema import schema_problems

BRIDGE_OPS = frozenset({"load", "event", "call_tool", "call_tools", "command", "settle", "sleep",
                        "server", "set_env", "shutdown", "reload", "exit", "cli"})
#: a scenario of ``cli`` steps judges the bridge's command-line program and loads no bridge
CLI_OPS = frozenset({"cli", "sleep", "server"})
FAKE_OPS = frozenset({"rpc", "http", "sleep", "server"})
HTTP_SERVER_ACTIONS = frozenset({"arm", "clear_faults", "forget_sessions", "rotate_token"})
#: server actions on processes only the runner owns when it is the client (subject fake)
FAKE_SERVER_ACTIONS = frozenset({"close_stdin", "kill_lock_holder"})


class ScenarioError(UntrustedInputError, ValueError):
    """A scenario that cannot be used; ``str()`` is one line naming the file, problem and fix."""


@dataclass(frozen=True)
class Problem:
    path: str
    message: str
    fix: str = ""
    pointer: str = ""

    def __str__(self) -> str:
        where = f"{self.path}: {self.pointer}: " if self.pointer else f"{self.path}: "
        return f"{where}{self.message}" + (f" ({self.fix})" if self.fix else "")


@dataclass(frozen=True)
class Context:
    """What the semantic rules check against: known behaviour IDs and tool names."""

    behaviours: Mapping[str, str]
    tools: tuple[str, ...]

    @classmethod
    def default(cls, behaviours: Sequence[Behaviour] | None = None) -> Context:
        found = behaviours if behaviours is not None else load_behaviours()
        return cls(behaviours={b.id: b.title for b in found},
                   tools=tuple(t["name"] for t in tool_catalogue()["tools"]))


@dataclass
class Catalogue:
    """The result of loading many files: the good scenarios and every problem found."""

    files: list[Path] = field(default_factory=list)
    scenarios: list[Scenario] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def display(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def scenarios_dir() -> Path:
    return fixtures_dir() / "scenarios"


def slow_scenarios_dir() -> Path:
    """The slow tier: scenarios that wait out a seed default of 30 s or more (``run --slow``)."""
    return fixtures_dir() / "slow"


def shipped_roots(*, slow: bool) -> list[Path]:
    """The shipped scenario directories: the catalogue, and the slow tier when asked for."""
    return [scenarios_dir(), slow_scenarios_dir()] if slow else [scenarios_dir()]


def discover(paths: Iterable[str | Path] | None = None) -> tuple[list[Path], list[Problem]]:
    """Scenario files under the given files/directories (default: the shipped scenarios)."""
    roots = [Path(p) for p in paths] if paths else [scenarios_dir()]
    files: list[Path] = []
    problems: list[Problem] = []
    for root in roots:
        if root.is_dir():
            files.extend(sorted(root.rglob("*.json")))
        elif root.is_file():
            files.append(root)
        else:
            problems.append(Problem(str(root), "no such file or directory",
                                    "give a scenario file or a directory of them"))
    return files, problems


def read_json(path: Path) -> tuple[Any, list[Problem]]:
    data, _, problems = _read(path)
    return data, problems


FIXTURE_MAX_BYTES = 4 * 1024 * 1024  # the largest shipped fixture is a few KiB


def _read(path: Path) -> tuple[Any, bytes, list[Problem]]:
    """The parsed file and its bytes (what the validation cache is keyed on)."""
    from palace_conformance import untrusted_file as untrusted

    try:
        content = untrusted.read_bytes(path, what="fixture", fix="check the path",
                                       max_bytes=FIXTURE_MAX_BYTES)
    except untrusted.UntrustedFileError as exc:
        return None, b"", [Problem(display(path), f"cannot read: {exc.problem}",
                                   "check the path (a fixture is a regular JSON file)")]
    try:  # decoded exactly as path.read_text does: UTF-8 with universal newlines
        text = io.TextIOWrapper(io.BytesIO(content), encoding="utf-8").read()
    except UnicodeDecodeError:
        return None, content, [Problem(display(path), "not UTF-8 text", "save the file as UTF-8")]
    try:
        data = json.loads(text)
        why = untrusted.depth_problem(data)
        if why:
            return None, content, [Problem(display(path), f"malformed JSON: {why}",
                                           "fix the JSON syntax")]
        return data, content, []
    except json.JSONDecodeError as exc:
        return None, content, [Problem(
            display(path), f"malformed JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}",
            "fix the JSON syntax")]
    except RecursionError:
        return None, content, [Problem(display(path), "malformed JSON: JSON nested too deeply",
                                       "fix the JSON syntax")]
    except ValueError:  # a number past int()'s digit limit
        return None, content, [Problem(display(path), "malformed JSON: a number too long to read",
                                       "fix the JSON syntax")]


def version_problem(data: Any, path: Path) -> Problem | None:
    """The format version gate; runs before the schema so a newer file gets an upgrade hint."""
    shown = display(path)
    if not isinstance(data, dict):
        return Problem(shown, f"expected a JSON object, got {type(data).__name__}",
                       "write one scenario object per file")
    version = data.get("schema_version")
    name = data.get("id") if isinstance(data.get("id"), str) else path.stem
    if version is None:
        return Problem(shown, "missing schema_version", f'add "schema_version": {SCHEMA_VERSION}')
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        return Problem(shown, f"schema_version {json.dumps(version)} is not a format version",
                       f"use {SCHEMA_VERSION}")
    if version > SCHEMA_VERSION:
        return Problem(shown, f"scenario {name} uses schema_version {version}; this "
                              f"palace-conformance understands {SCHEMA_VERSION}: upgrade",
                       "pip install --upgrade palace-conformance")
    return None


#: the modules whose rules decide whether a file is valid: a change to any of them (or to the
#: schemas, the behaviours or the tools) makes every remembered verdict void
RULES = (__name__, "palace_conformance.scenarios.schema", "palace_conformance.scenarios.model",
         "palace_conformance.scenarios.matching", "palace_conformance.scenarios.placeholders",
         "palace_conformance.scenarios.palace_state", "palace_conformance.scenarios.behaviours",
         "palace_conformance.scenarios.checks", "palace_conformance.scenarios.paths",
         "palace_conformance.fake.faults")


def validation_cache(context: Context) -> ValidationCache:
    """The verdicts remembered for this context (a no-op when caching is off)."""
    directory = cache_dir()
    if directory is None:
        return ValidationCache(None, None)
    return ValidationCache(directory, fingerprint(
        [import_module(name) for name in RULES], fixtures_dir() / "schema", context.behaviours,
        context.tools))


def load_file(path: Path, context: Context,
              cache: ValidationCache | None = None) -> tuple[Scenario | None, list[Problem]]:
    """One file: its scenario when it is usable, and every problem found.

    With a ``cache``, a file whose exact bytes were found valid before skips the checks, and a
    file found valid now is remembered (``cache.save()`` writes it).
    """
    data, content, problems = _read(path)
    if problems:
        return None, problems
    if isinstance(data, dict):  # its secrets never reach the console, whatever happens next
        from palace_conformance.redaction import CONSOLE, scenario_secrets

        CONSOLE.add(scenario_secrets(data))
    if cache is not None and cache.known_valid(path, content):
        return Scenario.from_json(data, path), []
    scenario, problems = _checked(path, data, context)
    if scenario is not None and cache is not None:
        cache.remember(path, content)
    return scenario, problems


def _checked(path: Path, data: Any, context: Context) -> tuple[Scenario | None, list[Problem]]:
    """Every check, in order: format version, schema, then the semantic rules."""
    problem = version_problem(data, path)
    if problem is not None:
        return None, [problem]
    shown = display(path)
    found = [Problem(shown, p.message, p.fix, p.pointer) for p in schema_problems(data)]
    if found:  # list the semantic problems too, so one pass shows everything to fix
        return None, found + _semantic_beside(found, data, path, context)
    found = [Problem(shown, message, fix, where)
             for where, message, fix in semantic_problems(data, path, context)]
    if found:
        return None, found
    return Scenario.from_json(data, path), []


def _semantic_beside(schema_found: list[Problem], data: Any, path: Path,
                     context: Context) -> list[Problem]:
    """The semantic problems of a file that also breaks the schema, outside the places the
    schema problems are (those would be echoes of them). The rules expect a schema-valid file:
    where they cannot read this one, they report nothing and wait for the schema's fix."""
    if not isinstance(data, dict):
        return []
    try:
        semantic = semantic_problems(data, path, context)
    except (KeyError, TypeError, AttributeError, ValueError, IndexError):
        return []
    broken = [p.pointer for p in schema_found]

    def echoes(where: str) -> bool:
        return any(where == b or where.startswith(b.rstrip("/") + "/") or
                   b.startswith(where.rstrip("/") + "/") for b in broken if b != "/")

    return [Problem(display(path), message, fix, where)
            for where, message, fix in semantic if not echoes(where)]


def load_catalogue(paths: Iterable[str | Path] | None = None,
                   context: Context | None = None) -> Catalogue:
    """Load every scenario under ``paths``; ids must be unique across all of them."""
    context = context or Context.default()
    files, problems = discover(paths)
    catalogue = Catalogue(files=files, problems=problems)
    cache = validation_cache(context)
    seen: dict[str, Path] = {}
    for path in files:
        scenario, found = load_file(path, context, cache)
        catalogue.problems.extend(found)
        if scenario is None:
            continue
        if scenario.id in seen:
            catalogue.problems.append(Problem(
                display(path), f"duplicate id {scenario.id!r}, already used by "
                               f"{display(seen[scenario.id])}",
                "give each scenario its own id (ids are never reused)", "/id"))
            continue
        seen[scenario.id] = path
        catalogue.scenarios.append(scenario)
    cache.save()
    return catalogue


def load_scenario(path: str | Path, context: Context | None = None) -> Scenario:
    """One scenario, or :class:`ScenarioError` with its first problem (one line)."""
    context = context or Context.default()
    cache = validation_cache(context)
    scenario, problems = load_file(Path(path), context, cache)
    cache.save()
    if scenario is None:
        more = f" (+{len(problems) - 1} more: palace-conformance fixtures validate {path})" \
            if len(problems) > 1 else ""
        raise ScenarioError(f"{problems[0]}{more}")
    return scenario


# --- semantic rules ------------------------------------------------------------------------

Found = Iterator[tuple[str, str, str]]  # (pointer, problem, fix)


def _suggest(word: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.75)
    return f"did you mean {close[0]}?" if close else ""


def semantic_problems(data: dict[str, Any], path: Path,
                      context: Context) -> list[tuple[str, str, str]]:
    """Rules beyond the schema: names, references, transports and placeholders that fit."""
    return [*_identity(data, path, context), *_steps(data, context), *_faults(data, context),
            *_expectations(data, context), *_seed_only(data), *_cites(data),
            *_palace_labels(data),
            *_fresh_palace(data),
            *_placeholders(data), *paths.fixture_problems(data), *_declared_slack(data),
            *_pace_names(data), *_budget_counts(data), *_declared_defaults(data)]


def _declared_defaults(data: dict[str, Any]) -> Found:
    """``dimensions.defaults`` names knobs ``env`` leaves unset: a default asserted while the
    scenario sets the knob would put a wrong cell in the dimension table."""
    env = data.get("env") or {}
    for number, name in enumerate((data.get("dimensions") or {}).get("defaults", [])):
        raw = env.get(name)
        if isinstance(raw, str) and raw.strip():
            yield (f"/dimensions/defaults/{number}", f"{name} is set in env to {raw!r}, so the "
                   "scenario does not run at its default",
                   "drop the name from dimensions.defaults, or from env")


def _pace_names(data: dict[str, Any]) -> Found:
    """``env_pace`` names values the scenario sets: a pace mark on nothing would say a knob is
    only pace without the scenario setting it."""
    env = data.get("env") or {}
    for number, name in enumerate(data.get("env_pace", [])):
        if env.get(name) is None:
            yield (f"/env_pace/{number}", f"{name} is not set in env (a null value is the "
                   "knob's default, never pace)",
                   "list only names whose value env sets, or drop the name from env_pace")


def _budget_counts(data: dict[str, Any]) -> Found:
    """Each ``budget_counts`` names a budget ``env`` sets to a number, and points at an integer
    of the file: a pointer to nothing would leave a count unmoved for a bridge of another
    budget, and judge it against the scenario's."""
    env = data.get("env") or {}
    for name, pointers in (data.get("budget_counts") or {}).items():
        value = env.get(name)
        if not (isinstance(value, str) and value.isdigit()):
            yield (f"/budget_counts/{name}", f"{name} is not set to a number in env",
                   "set the budget in env, or drop it from budget_counts")
        for number, pointer in enumerate(pointers):
            node = resolve_pointer(data, pointer)
            if not isinstance(node, int) or isinstance(node, bool):
                yield (f"/budget_counts/{name}/{number}", f"{pointer} is no integer of this file",
                       "point at a count's equals/at_least/at_most or processes.spawned")


def _declared_slack(data: dict[str, Any]) -> Found:
    """Every duration of a scenario declares its slack: a lower bound alone lets a bridge that is
    seconds late pass (issue 12). Runner tests may still omit it to pin the format's meaning."""
    timings: list[tuple[str, Any]] = []
    for index, step in enumerate(data["steps"]):
        expect = step.get("expect") or {}
        if "elapsed_ms" in expect:
            timings.append((f"/steps/{index}/expect/elapsed_ms", expect["elapsed_ms"]))
        for number, check in enumerate(expect.get("journal", [])):
            if check["check"] == "gap":
                timings.append((f"/steps/{index}/expect/journal/{number}/ms", check["ms"]))
    for number, check in enumerate((data.get("expect") or {}).get("journal", [])):
        if check["check"] == "gap":
            timings.append((f"/expect/journal/{number}/ms", check["ms"]))
    for at, timing in timings:
        if "slack_ms" not in timing:
            yield (at, "a duration without slack_ms has no upper bound",
                   "declare the slack a loaded CI machine needs, tight enough to tell a wrong "
                   "time apart: fixtures/README.md, Timing")


def _identity(data: dict[str, Any], path: Path, context: Context) -> Found:
    sid: str = data["id"]
    area = sid.split(".", 1)[0]
    if sid != path.stem:
        yield ("/id", f"id {sid!r} does not match the file name {path.name!r}",
               f"rename the file to {sid}.json or change the id")
    if area not in AREAS:
        yield ("/id", f"id {sid!r} starts with unknown area {area!r}",
               f"start it with one of: {', '.join(AREAS)}")
    elif path.parent.name in AREAS and path.parent.name != area:
        yield ("/id", f"file is in {path.parent.name}/ but its id says area {area!r}",
               f"move it to scenarios/{area}/")
    for index, bid in enumerate(data["covers"]):
        if bid not in context.behaviours:
            hint = _suggest(bid, context.behaviours)
            yield (f"/covers/{index}", f"unknown behaviour ID {bid!r}",
                   "use an ID from fixtures/behaviours.json" + (f"; {hint}" if hint else ""))
    transports = set(data["transports"])
    if "http" in data and "http" not in transports:
        yield ("/http", "'http' options given but the scenario does not run on http",
               "add http to transports or remove the 'http' block")
    token = (data.get("http") or {}).get("token")
    if "http" in transports and token is not None and not token:
        yield ("/http/token", "empty token", "use null for no token")


def _step_transports(data: dict[str, Any], step: Mapping[str, Any]) -> set[str]:
    transports = set(data["transports"])
    limit = step.get("transport")
    return transports & {limit} if limit else transports


def _steps(data: dict[str, Any], context: Context) -> Found:
    subject = data.get("subject", "bridge")
    steps: list[dict[str, Any]] = data["steps"]
    allowed = FAKE_OPS if subject == "fake" else BRIDGE_OPS
    labels: dict[str, int] = {}
    if subject == "bridge" and any(step["op"] == "cli" for step in steps):
        yield from _cli_steps(data, steps)
    elif subject == "bridge" and steps[0]["op"] != "load":
        yield ("/steps/0/op", f"a bridge scenario starts with 'load', not {steps[0]['op']!r}",
               'add {"op": "load"} as the first step')
    for index, step in enumerate(steps):
        at = f"/steps/{index}"
        op = step["op"]
        if op not in allowed:
            yield (f"{at}/op", f"op {op!r} is not available to subject {subject!r}",
                   f"use one of: {', '.join(sorted(allowed))}")
        label = step.get("as")
        if label is not None:
            if label in labels:
                yield (f"{at}/as", f"label {label!r} already names step {labels[label]}",
                       "give each step its own label")
            labels[label] = index
        runs_on = _step_transports(data, step)
        if not runs_on:
            yield (f"{at}/transport", f"step is limited to {step['transport']!r}, which this "
                   "scenario does not run on", "remove the limit or add the transport")
        expect = step.get("expect") or {}
        expects_missing = (expect.get("error") or {}).get("kind") == "no_such_tool"
        if op == "call_tool":
            yield from _tool_name(step["name"], f"{at}/name", expects_missing, context)
        if op == "call_tools":
            yield from _call_tools_step(step, at, context)
        if op == "server":
            yield from _server_step(data, step, at, runs_on)
        if op == "http" and subject == "fake" and "stdio" in runs_on:
            yield (f"{at}/op", "op 'http' needs the HTTP fake but this step also runs on stdio",
                   'add "transport": "http" to the step or run the scenario on http only')
        if expect.get("ok") is True and "error" in expect:
            yield (f"{at}/expect", "expects ok: true and an error at once",
                   "drop 'ok' (an error implies ok: false) or drop 'error'")
        if op in ("sleep", "set_env") and expect.get("ok") is False:
            yield (f"{at}/expect/ok", f"a {op} step cannot fail", "remove the expectation")
    yield from _exit_steps(data, steps)


def _cli_steps(data: dict[str, Any], steps: list[dict[str, Any]]) -> Found:
    """A scenario with a ``cli`` step judges the bridge's command-line program: it loads no
    bridge (its palace would mix with the program's on the wire), so its steps are ``cli``,
    ``sleep`` and ``server`` only, and it requires capability ``cli``."""
    for index, step in enumerate(steps):
        if step["op"] not in CLI_OPS:
            yield (f"/steps/{index}/op", f"op {step['op']!r} in a scenario of 'cli' steps (the "
                   "command-line program is run, no bridge is loaded)",
                   f"use only {', '.join(sorted(CLI_OPS))}, or judge the CLI in a scenario "
                   "of its own")
    if "cli" not in data.get("requires", ()):
        yield ("/requires", "a scenario of 'cli' steps does not require capability 'cli'",
               'add "cli" to "requires" (a bridge without a command-line program is then not '
               "applicable)")


def _exit_steps(data: dict[str, Any], steps: list[dict[str, Any]]) -> Found:
    """An ``exit`` ends the host, so it is the last step on each transport it runs on, and
    the tools cannot be listed at the end of such a run (``expect.tools``)."""
    gone: set[str] = set()
    for index, step in enumerate(steps):
        runs_on = _step_transports(data, step)
        if runs_on & gone:
            yield (f"/steps/{index}", f"step after an 'exit' on {', '.join(sorted(runs_on & gone))}"
                   " (the host is gone)", "make 'exit' the last step")
        if step["op"] == "exit":
            gone |= runs_on
    if gone and "tools" in (data.get("expect") or {}):
        yield ("/expect/tools", "the tools are listed at the end of the run, but an 'exit' step "
               "ended the host", "check the tools in a step before the 'exit'")


def _tool_name(name: str, at: str, expects_missing: bool, context: Context) -> Found:
    if name not in context.tools and not expects_missing:
        hint = _suggest(name, context.tools)
        yield (at, f"unknown tool {name!r}",
               "use a tool of the mempalace 3.11.0 catalogue" + (f"; {hint}" if hint else "")
               + " (or expect error kind no_such_tool)")


def _call_tools_step(step: Mapping[str, Any], at: str, context: Context) -> Found:
    """Each call's tool is known (unless its expectation is no_such_tool), and ``expect.calls``
    has one expectation per call."""
    calls = step["calls"]
    expected = (step.get("expect") or {}).get("calls")
    for index, call in enumerate(calls):
        call_expect = expected[index] if expected and index < len(expected) else {}
        missing = (call_expect.get("error") or {}).get("kind") == "no_such_tool"
        yield from _tool_name(call["name"], f"{at}/calls/{index}/name", missing, context)
    if expected is not None and len(expected) != len(calls):
        yield (f"{at}/expect/calls", f"{len(expected)} expectation(s) for {len(calls)} call(s)",
               "give one expectation per call, in the order of 'calls' ({} for no expectation)")


def _server_step(data: dict[str, Any], step: Mapping[str, Any], at: str,
                 runs_on: set[str]) -> Found:
    action = step["action"]
    if action in HTTP_SERVER_ACTIONS and "stdio" in runs_on:
        yield (f"{at}/action", f"server action {action!r} needs the HTTP fake's control API but "
               "this step also runs on stdio", 'add "transport": "http" to the step')
    if action == "forget_sessions" and not (data.get("http") or {}).get("sessions"):
        yield (f"{at}/action", "forget_sessions needs the fake in stateful mode",
               'set "http": {"sessions": true}')
    if action in FAKE_SERVER_ACTIONS and data.get("subject", "bridge") != "fake":
        yield (f"{at}/action", f"server action {action!r} is for subject 'fake' only (a bridge "
               "owns its children and its lock)", 'use "subject": "fake", or another action')
    elif action == "close_stdin" and "http" in runs_on:
        yield (f"{at}/action", "server action 'close_stdin' needs the stdio fake but this step "
               "also runs on http", 'add "transport": "stdio" to the step')
    elif action == "kill_lock_holder" and not (
            (data.get("palace") or {}).get("lock") or {}).get("held"):
        yield (f"{at}/action", "server action 'kill_lock_holder' but no process holds the lock",
               'set "palace": {"lock": {"held": true}}')


def _fault_list_problems(faults: list[Any], at: str, transports: set[str],
                         context: Context) -> Found:
    try:
        plan_from_json({"schema_version": 1, "faults": faults}, source="faults")
    except FaultPlanError as exc:
        yield (at, str(exc).removeprefix("faults: "), "see 'palace-conformance fake faults'")
        return
    for index, fault in enumerate(faults):
        where = f"{at}/{index}"
        on = fault.get("on") or {}
        tool = on.get("tool")
        if isinstance(tool, str) and tool not in context.tools:
            hint = _suggest(tool, context.tools)
            yield (f"{where}/on/tool", f"unknown tool {tool!r}: this fault would never fire",
                   "use a tool of the mempalace 3.11.0 catalogue" + (f"; {hint}" if hint else ""))
        supports = set(ACTIONS[fault["action"]][0])
        if not supports & transports:
            yield (f"{where}/action", f"action {fault['action']!r} applies to "
                   f"{', '.join(sorted(supports))} only, but this runs on "
                   f"{', '.join(sorted(transports))}", "add the transport or drop the fault")
        limit = on.get("transport")
        if limit is not None and limit not in transports:
            yield (f"{where}/on/transport", f"limited to {limit}, which this does not run on: "
                   "the fault would never fire", "remove the limit or add the transport")


def _faults(data: dict[str, Any], context: Context) -> Found:
    transports = set(data["transports"])
    faults = data.get("faults", [])
    yield from _fault_list_problems(faults, "/faults", transports, context)
    ids: dict[str, str] = {}
    groups = [("/faults", faults)]
    for index, step in enumerate(data["steps"]):
        if step["op"] == "server" and "faults" in step:
            at = f"/steps/{index}/faults"
            yield from _fault_list_problems(step["faults"], at, _step_transports(data, step),
                                            context)
            groups.append((at, step["faults"]))
    for at, group in groups:
        for index, fault in enumerate(group):
            fid = fault.get("id", f"fault-{index + 1}")
            if fid in ids and ids[fid] != at:
                yield (f"{at}/{index}/id", f"fault id {fid!r} is also used at {ids[fid]}",
                       "give each fault of a scenario its own id")
            ids.setdefault(fid, at)


def _check_list(checks: list[Any], at: str, stream: str, context: Context) -> Found:
    for index, check in enumerate(checks):
        where = f"{at}/{index}"
        for key in ("match", "first", "then", "from", "to"):
            if key in check:
                for sub, problem, fix in matching.problems(check[key]):
                    yield (f"{where}/{key}{sub}", problem, fix)
        for number, item in enumerate(check.get("items", [])):
            for sub, problem, fix in matching.problems(item):
                yield (f"{where}/items/{number}{sub}", problem, fix)
        if check["check"] == "gap" and stream != "journal":
            yield (f"{where}/check", "gap needs timestamped records; only the journal has them",
                   "move this check to expect.journal")


def _tools_expect(tools: Mapping[str, Any] | None, at: str, context: Context) -> Found:
    if not tools:
        return
    registered = tools.get("registered")
    names = [*(registered if isinstance(registered, list) else []),
             *tools.get("includes", []), *tools.get("excludes", [])]
    for name in names:
        if name not in context.tools:
            hint = _suggest(name, context.tools)
            yield (at, f"unknown tool {name!r}", "use a tool of the mempalace 3.11.0 catalogue"
                   + (f"; {hint}" if hint else ""))


def _expectations(data: dict[str, Any], context: Context) -> Found:
    for index, step in enumerate(data["steps"]):
        expect = step.get("expect")
        if not expect:
            continue
        at = f"/steps/{index}/expect"
        if "result" in expect:
            for sub, problem, fix in matching.problems(expect["result"]):
                yield (f"{at}/result{sub}", problem, fix)
        data_matcher = (expect.get("error") or {}).get("data")
        if data_matcher is not None:
            for sub, problem, fix in matching.problems(data_matcher):
                yield (f"{at}/error/data{sub}", problem, fix)
        yield from _check_list(expect.get("effects", []), f"{at}/effects", "effects", context)
        yield from _check_list(expect.get("journal", []), f"{at}/journal", "journal", context)
        yield from _tools_expect(expect.get("tools"), f"{at}/tools", context)
    expect = data.get("expect") or {}
    yield from _check_list(expect.get("journal", []), "/expect/journal", "journal", context)
    yield from _check_list(expect.get("effects", []), "/expect/effects", "effects", context)
    yield from _tools_expect(expect.get("tools"), "/expect/tools", context)


def _seed_only(data: dict[str, Any]) -> Found:
    """Every ``seed_only`` pointer names a part of its expectation (a typo would quietly keep a
    seed convention at the core level)."""
    owners = [(f"/steps/{i}/expect", s.get("expect")) for i, s in enumerate(data["steps"])]
    owners.append(("/expect", data.get("expect")))
    for at, expect in owners:
        if not isinstance(expect, dict):
            continue
        for index, pointer in enumerate(expect.get("seed_only", [])):
            if pointer.startswith("/seed_only") or resolve_pointer(expect, pointer) is MISSING:
                yield (f"{at}/seed_only/{index}", f"{pointer} names nothing in this expect",
                       "point at one of its parts, e.g. /error/message_contains or /effects/0")


def _cites(data: dict[str, Any]) -> Found:
    """Every ``cites`` pointer names a part of its expectation and cites behaviours the
    scenario covers (a typo would quietly turn another behaviour red in ``matrix``)."""
    owners = [(f"/steps/{i}/expect", s.get("expect")) for i, s in enumerate(data["steps"])]
    owners.append(("/expect", data.get("expect")))
    covers = set(data["covers"])
    for at, expect in owners:
        if not isinstance(expect, dict) or not isinstance(expect.get("cites"), dict):
            continue
        for pointer, cited in expect["cites"].items():
            where = f"{at}/cites/{escape_token(pointer)}"
            if pointer.startswith(("/cites", "/seed_only")) or (
                    pointer and resolve_pointer(expect, pointer) is MISSING):
                yield (where, f"{pointer} names nothing in this expect",
                       "point at one of its parts, e.g. /effects/0 or /processes ('' for all)")
            for bid in cited if isinstance(cited, list) else ():
                if bid not in covers:
                    yield (where, f"cites {bid}, which the scenario does not cover",
                           f"cite one of {', '.join(data['covers'])} or add {bid} to covers")


def _transports_at(data: dict[str, Any], where: str) -> set[str]:
    """Which transports a value at ``where`` is used on (a step or check limit narrows it)."""
    transports = set(data["transports"])
    match = re.match(r"^/steps/(\d+)", where)
    if match:
        return _step_transports(data, data["steps"][int(match.group(1))])
    match = re.match(r"^/expect/(journal|effects)/(\d+)", where)
    if match:
        check = data["expect"][match.group(1)][int(match.group(2))]
        limit = check.get("transport")
        return transports & {limit} if limit else transports
    return transports


def _fresh_palace(data: dict[str, Any]) -> Found:
    """A fresh palace has no chroma database, so it cannot hold what only a vector write files."""
    palace = data.get("palace") or {}
    if palace.get("state") != "fresh":
        return
    for key in ("diary", "drawers"):
        if palace.get(key):
            yield (f"/palace/{key}", f"a fresh palace holds no {key} (filing one is the vector "
                   "write that ends freshness)",
                   f'drop "{key}", or drop "state": "fresh" (an initialised palace)')


def _palace_labels(data: dict[str, Any]) -> Found:
    """Seeded events name earlier ones by label (``as``), since their ids are made at seeding."""
    labels: set[str] = set()
    for index, event in enumerate((data.get("palace") or {}).get("events") or ()):
        at = f"/palace/events/{index}"
        for where, label in event_id_references(event, at):
            if label not in labels:
                yield (where, f"$event_id {label!r} names no earlier event",
                       f'label an earlier event with "as": "{label}" (ids exist only once an '
                       "event is filed, so only earlier events can be named)")
        label = event.get(LABEL)
        if isinstance(label, str):
            if label in labels:
                yield (f"{at}/as", f"event label {label!r} is used twice",
                       "give each labelled event its own label")
            labels.add(label)


def _placeholders(data: dict[str, Any]) -> Found:
    token = (data.get("http") or {}).get("token")
    for where, text in placeholders.walk_strings(data):
        for name in placeholders.names(text):
            if name not in PLACEHOLDERS:
                yield (where, f"unknown placeholder ${{{name}}}",
                       f"use one of: {', '.join('${' + p + '}' for p in PLACEHOLDERS)}")
            elif name in placeholders.HTTP_ONLY:
                used_on = _transports_at(data, where)
                if "stdio" in used_on:
                    yield (where, f"${{{name}}} has no value on stdio runs",
                           'limit the step or check with "transport": "http", '
                           "or run the scenario on http only")
                elif name == "FAKE_TOKEN" and token is None:
                    yield (where, "${FAKE_TOKEN} used but the fake has no token",
                           'set "http": {"token": "..."}')


__all__ = [
    "Catalogue", "Context", "Problem", "ScenarioError", "discover", "load_catalogue", "load_file",
    "load_scenario", "read_json", "semantic_problems", "validation_cache", "version_problem",
]
