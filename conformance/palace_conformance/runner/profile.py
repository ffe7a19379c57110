"""Bridge profiles: what the kit must know about one bridge to judge it fairly.

A profile (``fixtures/schema/bridge-profile.schema.json``, JSON or TOML) says how to start the
bridge, what it claims (capabilities, level, whether it is a copy of the seed), and where it
differs from the seed without being wrong: its own knob names or fixed constants, settings files
instead of environment variables, its own tool names, and the agent-visible channel it uses for the
wake-up, for diagnostics and for errors. The runner applies it at the edges (the environment a
scenario sets, the files in the run's HOME, tool names in expectations) so the same scenarios
judge every bridge.

Profiles are untrusted input: nothing in one is executed except its ``entry``, which the user named
by passing the profile, and files are written only under the run's HOME or working directory.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlsplit

from palace_conformance.errors import UntrustedInputError
from palace_conformance.scenarios.paths import (
    RESERVED_IN_HOME,
    RESERVED_IN_RUN,
    reserved_env_problem,
    reserved_problem,
)

PROFILE_SCHEMA = "bridge-profile.schema.json"
PROFILE_MAX_BYTES = 4 * 1024 * 1024  # a profile is a few KiB; files' contents included
_PLACEHOLDER = re.compile(r"\$\{(FAKE_URL|FAKE_TOKEN|FAKE_SCHEME|FAKE_HOST|FAKE_PORT|FAKE_PATH"
                          r"|TMP|HOME|CWD|ENV:[A-Za-z_][A-Za-z0-9_]*)(?::(number|boolean|string))?\}")
#: the text a ``:boolean`` placeholder reads as true / false (any other text stays a string)
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})
_OMIT = object()  # a whole-value typed placeholder with no value: the member is left out


class ProfileError(UntrustedInputError, ValueError):
    """A profile that cannot be used; the message is one line naming the file, the problem and
    the fix."""


@dataclass(frozen=True)
class Knob:
    """What a bridge has in place of one of the seed's variables."""

    env: str | None = None  # its own variable
    unit: str = "ms"  # "s": it reads seconds where the seed reads milliseconds
    fixed: int | str | None = None  # no knob: this constant is what it does
    absent: bool = False  # neither knob nor behaviour
    same_as: str | None = None  # no knob of its own: it follows this other seed knob


#: the seed's defaults of the knobs a ``same_as`` may follow (a follower unset by a scenario has
#: this value in the seed, and the followed knob's value in the bridge)
SEED_DEFAULT_MS = {"MEMPALACE_MCP_TIMEOUT_MS": 60000, "MEMPALACE_MCP_INIT_TIMEOUT_MS": 300000}
#: the shortest bound a start of the palace (the fake's interpreter, on a loaded machine) gets
#: when a knob that also bounds the start-up follows a short pace value (``same_as``)
SAME_AS_FLOOR_MS = 5000


@dataclass(frozen=True)
class ToolRoute:
    """One catalogue tool a bridge tool stands for: a renamed tool (``when`` empty), or one of
    the catalogue tools a multiplexing tool picks by fixed arguments (``{"action": "read"}``)."""

    own: str  # the bridge's tool name
    tool: str  # the catalogue tool it calls
    when: Mapping[str, Any] = field(default_factory=dict)  # arguments that select it


@dataclass(frozen=True)
class ProfileFile:
    path: str  # with placeholders; starts with ${HOME}/ or ${CWD}/
    content: str | None
    json_value: Any
    mode: int
    when: str  # always | remote | local


@dataclass(frozen=True)
class Profile:
    name: str
    entry: str
    source: Path  # the profile file; relative paths in ``entry`` are relative to its folder
    capabilities: tuple[str, ...] | None = None  # None: what the host declares
    seed_copy: bool = False
    level: str = "core"
    knobs: Mapping[str, Knob] = field(default_factory=dict)
    files: tuple[ProfileFile, ...] = ()
    path_programs: tuple[str, ...] = ()
    tool_map: Mapping[str, str] = field(default_factory=dict)  # the renamed tools (no ``when``)
    extra_tools_allowed: bool = False
    wakeup_channel: str = "message"
    diagnostics_channel: str = "stderr"
    errors_channel: str | None = None  # "throw" | "is_error"; None: either, at the core level
    #: every (bridge tool, catalogue tool, fixed arguments) of ``tools.map``, in profile order
    tool_routes: tuple[ToolRoute, ...] = ()
    #: ``tools.static``: the tools are registered at load whatever the palace state, from the
    #: bridge's own list; it never sends ``tools/list``
    static_tools: bool = False
    #: ``results.path``: a JSON pointer into a call result's envelope where the palace's JSON is
    results_path: str | None = None
    #: ``claims.read_retry``: a crashed read is retried once on a new child (never a write)
    read_retry: bool = False
    #: ``claims.respawn_budget``: "session" (the seed's latch) or "call" (each call its own)
    respawn_budget: str = "session"
    #: ``servers``: role -> program name, for a bridge that runs a light server beside the full
    #: one; empty: one server, every child counted
    servers: Mapping[str, str] = field(default_factory=dict)

    @property
    def plain_seed_copy(self) -> bool:
        """A copy of the seed that the profile only describes (its capabilities, its level):
        no knob, file, program, tool, envelope, channel or retry of its own. The golden traces
        judge it as they judge a bridge named without a profile, since nothing of its trace is
        translated."""
        return (self.seed_copy and not (self.knobs or self.files or self.path_programs
                                        or self.tool_map or self.tool_routes or self.servers)
                and not (self.static_tools or self.read_retry or self.extra_tools_allowed)
                and self.results_path is None and self.respawn_budget == "session"
                and self.wakeup_channel == "message" and self.diagnostics_channel == "stderr")

    def record(self) -> dict[str, Any]:
        """What a run's results keep of it (``RunResult.profile``): enough for ``diff --from``
        to compare a saved run as this profile does."""
        offered = sorted({route.tool for route in self.tool_routes})
        return {"name": self.name, "path": str(self.source), "offered": offered or None}

    @property
    def bridge(self) -> str:
        """``entry`` as ``--bridge`` would say it, with a file path made absolute."""
        kind, sep, rest = self.entry.partition(":")
        if sep and kind == "pi-extension" and not rest.startswith("/"):
            file, query_sep, query = rest.partition("?")
            absolute = (self.source.parent / file).resolve()
            return f"pi-extension:{absolute}{query_sep}{query}"
        return self.entry

    def translate_env(self, env: Mapping[str, str], own: Collection[str] | None = None
                      ) -> tuple[dict[str, str], str | None]:
        """The scenario's environment in the bridge's own knob names, or the reason the scenario
        cannot be run as written (a value the bridge cannot be given). ``own``: the names the
        scenario itself sets; only those are translated (a knob never reads the runner's own
        environment, e.g. ``SHELL``). A knob aimed at a reserved name (the loader refuses it)
        is the reason, never applied."""
        out = dict(env)
        for name, knob in self.knobs.items():
            if name not in env or (own is not None and name not in own):
                continue
            if knob.env is not None:
                why = reserved_env_problem(knob.env)
                if why:
                    return out, f"the profile's knob {name} is refused: {why}"
            value = env[name]
            if knob.same_as is not None:
                followed = env.get(knob.same_as) or str(SEED_DEFAULT_MS.get(knob.same_as, ""))
                if followed != value:
                    return out, (f"the scenario tests {name}={value} (essential, not pace); "
                                 f"this bridge's follows {knob.same_as} (same_as), which the "
                                 f"scenario gives {followed or 'its default'}")
                continue
            if knob.absent:
                return out, (f"the scenario tests {name}={value} (essential, not pace), which "
                             "this bridge has no equivalent of")
            if knob.fixed is not None:
                if str(knob.fixed) != value:
                    return out, (f"the scenario tests {name}={value} (essential, not pace); this "
                                 f"bridge's is fixed at {knob.fixed}")
                continue
            if knob.env is not None:
                out[knob.env] = _convert(value, knob.unit)
        return out, self._cut_start(env, own)

    def _cut_start(self, env: Mapping[str, str], own: Collection[str] | None) -> str | None:
        """Why a value the scenario tests would bound this bridge's start-up too (a knob that
        follows it, ``same_as``, unset) so short that a start of the palace is cut; or None."""
        for name, knob in self.knobs.items():
            followed = knob.same_as
            if followed is None or name in env or followed not in env or (
                    own is not None and followed not in own):
                continue
            value = env[followed]
            if value.isdigit() and 0 < int(value) < SAME_AS_FLOOR_MS:
                return (f"the scenario tests {followed}={value} (essential, not pace), and this "
                        f"bridge's {name} follows it (same_as): a start-up bounded by {value} ms "
                        "cannot be judged")
        return None

    def files_for(self, *, home: Path, cwd: Path, tmp: Path, remote: bool,
                  values: Mapping[str, str],
                  env: Mapping[str, str]) -> list[tuple[Path, bytes, int]]:
        """The files to write before load: (absolute path, bytes, mode); never outside HOME/cwd."""
        out = []
        for item in self.files:
            if (item.when == "remote" and not remote) or (item.when == "local" and remote):
                continue
            base, relative = _anchor(item.path, home, cwd)
            expanded = _expand(relative, values, env, home, cwd, tmp)
            target = (base / expanded).resolve()
            if not target.is_relative_to(base.resolve()):
                raise ProfileError(f"profile {self.source}: file {_short(item.path)} leaves its "
                                   "folder; keep it under ${HOME}/ or ${CWD}/ without '..'")
            why = reserved_problem(expanded, RESERVED_IN_HOME if base == home else RESERVED_IN_RUN)
            if why:
                raise ProfileError(f"profile {self.source}: file {_short(item.path)} {why}; "
                                   "write it elsewhere under ${HOME}/ or ${CWD}/")
            if item.content is not None:
                data = _expand(item.content, values, env, home, cwd, tmp).encode("utf-8")
            else:
                data = json.dumps(_expand_json(item.json_value, values, env, home, cwd, tmp),
                                  indent=2).encode("utf-8")
            out.append((target, data, item.mode))
        return out


def load_profile(path: str | Path) -> Profile:
    """Read and validate a profile (``.json`` or ``.toml``); :class:`ProfileError` otherwise."""
    from palace_conformance import untrusted_file as untrusted
    from palace_conformance.scenarios.schema import schema_problems

    source = Path(path)
    fix = "give the path of a .json or .toml bridge profile (docs/profiles.md)"
    try:
        raw = untrusted.read_bytes(source, what="profile", fix=fix,
                                   max_bytes=PROFILE_MAX_BYTES)
    except untrusted.UntrustedFileError as exc:
        raise ProfileError(f"cannot read profile {_short(str(source), 200)}: {exc.problem} "
                           f"({fix})") from None
    parse = untrusted.parse_toml if source.suffix.lower() == ".toml" else untrusted.parse_json
    try:
        data: Any = parse(raw, what="profile", path=source, fix="fix the file (docs/profiles.md)")
    except untrusted.UntrustedFileError as exc:
        raise ProfileError(str(exc)) from None
    knobs = data.get("knobs") if isinstance(data, dict) else None
    for name, knob in (knobs.items() if isinstance(knobs, dict) else ()):
        target = knob.get("env") if isinstance(knob, dict) else None
        why = reserved_env_problem(target) if isinstance(target, str) else None
        if why:  # before the schema, whose oneOf would only say "not valid under any"
            raise ProfileError(f"profile {source} at /knobs/{_short(str(name))[1:-1]}/env: {why}")
    problems = schema_problems(data, PROFILE_SCHEMA)
    if problems:
        first = problems[0]
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        fix = first.fix.replace("see fixtures/README.md", "see docs/profiles.md")
        raise ProfileError(f"profile {source} at {first.pointer}: {first.message}; "
                           f"{fix}{more} (every field: docs/profiles.md)")
    for item in data.get("files", []):
        _check_file_path(source, item["path"])
        _check_typed(source, item.get("json"))
    _check_tool_map(source, data.get("tools", {}).get("map", {}))
    for name, knob in data.get("knobs", {}).items():
        if isinstance(knob, dict) and knob.get("same_as") == name:
            raise ProfileError(f"profile {source} at /knobs/{name}/same_as: a knob cannot follow "
                               "itself; name the seed knob it follows (MEMPALACE_MCP_TIMEOUT_MS)")
    _check_capabilities(source, data.get("claims", {}).get("capabilities") or ())
    for own, entry in data.get("tools", {}).get("map", {}).items():
        if isinstance(entry, list) and len(entry) > 1 and not all(e.get("when") for e in entry):
            raise ProfileError(f"profile {source} at /tools/map/{own}: a tool that stands for "
                               "several catalogue tools picks one by its arguments; give each "
                               "entry a non-empty \"when\" ({\"action\": \"read\"})")
    claims = data.get("claims", {})
    seed_copy = bool(claims.get("seed_copy", False))
    channels = data.get("channels", {})
    tools = data.get("tools", {})
    capabilities = claims.get("capabilities")
    return Profile(
        name=data["name"], entry=data["entry"], source=source.resolve(),
        capabilities=tuple(capabilities) if capabilities is not None else None,
        seed_copy=seed_copy, level=claims.get("level", "seed" if seed_copy else "core"),
        knobs={name: Knob(env=k.get("env"), unit=k.get("unit", "ms"), fixed=k.get("fixed"),
                          absent=bool(k.get("absent", False)), same_as=k.get("same_as"))
               for name, k in data.get("knobs", {}).items()},
        files=tuple(ProfileFile(f["path"], f.get("content"), f.get("json"),
                                int(f.get("mode", "0600"), 8), f.get("when", "always"))
                    for f in data.get("files", [])),
        path_programs=tuple(data.get("path_programs", ())),
        tool_map={own: routes[0].tool for own, routes in _routes(tools.get("map", {})).items()
                  if len(routes) == 1 and not routes[0].when},
        tool_routes=tuple(r for routes in _routes(tools.get("map", {})).values() for r in routes),
        static_tools=bool(tools.get("static", False)),
        results_path=data.get("results", {}).get("path"),
        read_retry=bool(claims.get("read_retry", False)),
        respawn_budget=claims.get("respawn_budget", "session"),
        servers=dict(data.get("servers", {})),
        extra_tools_allowed=bool(tools.get("extra_allowed", False)),
        wakeup_channel=channels.get("wakeup", "message"),
        diagnostics_channel=channels.get("diagnostics", "stderr"),
        errors_channel=channels.get("errors"),
    )


def _check_tool_map(source: Path, tool_map: Mapping[str, Any]) -> None:
    """A map onto a tool the catalogue does not have would make every scenario that calls the
    bridge's tool not applicable, silently."""
    from palace_conformance.resources import tool_catalogue

    known = {tool["name"] for tool in tool_catalogue()["tools"]}
    for own, target in _map_targets(tool_map):
        if target not in known:
            close = difflib.get_close_matches(target, sorted(known), n=1)
            hint = f"did you mean {close[0]}?" if close else "map it onto a catalogue tool"
            raise ProfileError(f"profile {source}: tools.map maps {own} onto {target}, which is "
                               f"no catalogue tool ({hint})")


def _map_targets(tool_map: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Every (bridge tool, catalogue tool) pair a ``tools.map`` names, whatever the entry's
    form (a name, ``{"tool", "when"}``, or a list of those)."""
    pairs: list[tuple[str, str]] = []
    for own, entry in tool_map.items():
        for item in entry if isinstance(entry, list) else [entry]:
            target = item if isinstance(item, str) else item.get("tool")
            if isinstance(target, str):
                pairs.append((own, target))
    return pairs


def _check_capabilities(source: Path, claimed: Any, roots: list[Path] | None = None) -> None:
    """A claimed capability no scenario needs is a claim nothing would ever judge."""
    needed = scenario_capabilities(roots)
    idle = [c for c in claimed if c not in needed]
    if idle:
        raise ProfileError(f"profile {source}: claims.capabilities claims {', '.join(idle)}, "
                           "which no scenario of the catalogue judges (drop the claim)")


def scenario_capabilities(roots: list[Path] | None = None) -> set[str]:
    """Every capability some scenario needs: its transports and ``requires`` (read as plain
    JSON: the loader's own checks are not needed to know what a file asks for)."""
    from palace_conformance.scenarios.loader import shipped_roots

    found: set[str] = set()
    for root in roots if roots is not None else shipped_roots(slow=True):
        for path in sorted(root.rglob("*.json")):
            try:
                data = json.loads(path.read_bytes())
            except (OSError, ValueError):
                continue  # a broken fixture is the loader's to report
            if isinstance(data, dict) and data.get("subject", "bridge") != "fake":
                for key in ("transports", "requires"):
                    values = data.get(key)
                    if isinstance(values, list):
                        found.update(v for v in values if isinstance(v, str))
    return found


def _routes(raw: Mapping[str, Any]) -> dict[str, list[ToolRoute]]:
    """``tools.map`` entries (a name, ``{"tool", "when"}``, or a list of those) as routes."""
    out: dict[str, list[ToolRoute]] = {}
    for own, entry in raw.items():
        entries = entry if isinstance(entry, list) else [entry]
        out[own] = [ToolRoute(own, e) if isinstance(e, str)
                    else ToolRoute(own, e["tool"], dict(e.get("when", {}))) for e in entries]
    return out


def _short(text: str, limit: int = 80) -> str:
    """``text`` quoted for a one-line message, cut to ``limit`` characters."""
    return repr(text if len(text) <= limit else text[:limit] + "...")


def _check_file_path(source: Path, path: str) -> None:
    if not path.startswith(("${HOME}/", "${CWD}/")) or ".." in PurePosixPath(path).parts:
        raise ProfileError(f"profile {source}: file path {_short(path)} must start with "
                           "${HOME}/ or ${CWD}/ and contain no '..' (files are written inside "
                           "the run only)")
    prefix, _, relative = path.partition("/")
    why = reserved_problem(relative, RESERVED_IN_HOME if prefix == "${HOME}" else RESERVED_IN_RUN)
    if why:
        raise ProfileError(f"profile {source} at /files: {_short(path)} {why} (the shims, "
                           "stand-ins, journal and lease); write it elsewhere under ${HOME}/ or "
                           "${CWD}/")


def _check_typed(source: Path, value: Any) -> None:
    """A typed placeholder (``${FAKE_PORT:number}``) inside a JSON value must be the whole
    string: only then can it become a number or a boolean."""
    if isinstance(value, list):
        for item in value:
            _check_typed(source, item)
    elif isinstance(value, dict):
        for item in value.values():
            _check_typed(source, item)
    elif isinstance(value, str):
        for match in _PLACEHOLDER.finditer(value):
            if match.group(2) in ("number", "boolean") and match.group(0) != value:
                raise ProfileError(
                    f"profile {source}: {match.group(0)} is part of the string {value!r}; a "
                    f"typed placeholder must be the whole JSON value (write \"{match.group(0)}\" "
                    "alone, or drop the type to splice it into text)")


def _anchor(path: str, home: Path, cwd: Path) -> tuple[Path, str]:
    prefix, _, relative = path.partition("/")
    return (home if prefix == "${HOME}" else cwd), relative


def _convert(value: str, unit: str) -> str:
    if unit == "ms":
        return value
    try:
        seconds = int(value) / 1000
    except ValueError:
        return value  # a malformed value is passed on as is: the bridge's warning is the test
    return str(int(seconds)) if math.isclose(seconds, round(seconds)) else f"{seconds:g}"


def _url_parts(url: str) -> dict[str, str]:
    """``FAKE_SCHEME``, ``FAKE_HOST``, ``FAKE_PORT`` (the scheme's default when the URL has none)
    and ``FAKE_PATH`` of the remote palace's URL; empty when there is none or it is no URL."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return {}
    if not parts.scheme or not parts.hostname:
        return {}
    default = {"http": 80, "https": 443}.get(parts.scheme)
    return {"FAKE_SCHEME": parts.scheme, "FAKE_HOST": parts.hostname,
            "FAKE_PORT": str(port if port is not None else default or ""),
            "FAKE_PATH": parts.path}


def _value(name: str, values: Mapping[str, str], env: Mapping[str, str], home: Path,
           cwd: Path, tmp: Path) -> str:
    if name.startswith("ENV:"):
        return env.get(name[4:], "")
    if name in ("FAKE_SCHEME", "FAKE_HOST", "FAKE_PORT", "FAKE_PATH"):
        return _url_parts(values.get("FAKE_URL", "")).get(name, "")
    return {"HOME": str(home), "CWD": str(cwd), "TMP": str(tmp)}.get(name) \
        or values.get(name, "")


def _expand(text: str, values: Mapping[str, str], env: Mapping[str, str], home: Path,
            cwd: Path, tmp: Path) -> str:
    return _PLACEHOLDER.sub(lambda match: _value(match.group(1), values, env, home, cwd, tmp),
                            text)


def _typed(text: str, kind: str) -> Any:
    """``text`` as a JSON ``kind``; text that is not one stays a string (the bridge's own
    complaint about it is then the test), and no text at all is :data:`_OMIT`."""
    if text == "":
        return _OMIT
    if kind == "number":
        try:
            return int(text)
        except ValueError:
            pass
        try:
            number = float(text)
        except ValueError:
            return text
        return number if math.isfinite(number) else text
    if kind == "boolean" and text.lower() in _TRUE | _FALSE:
        return text.lower() in _TRUE
    return text


def _expand_json(value: Any, values: Mapping[str, str], env: Mapping[str, str], home: Path,
                 cwd: Path, tmp: Path) -> Any:
    """Placeholders expanded in every string; a string that is one typed placeholder
    (``"${FAKE_PORT:number}"``, ``"${ENV:NAME:boolean}"``) becomes that JSON type, and leaves
    its member out (``null`` in a list) when it has no value."""
    if isinstance(value, str):
        whole = _PLACEHOLDER.fullmatch(value)
        if whole is not None and whole.group(2) in ("number", "boolean"):
            return _typed(_value(whole.group(1), values, env, home, cwd, tmp), whole.group(2))
        return _expand(value, values, env, home, cwd, tmp)
    if isinstance(value, list):
        items = [_expand_json(v, values, env, home, cwd, tmp) for v in value]
        return [None if item is _OMIT else item for item in items]
    if isinstance(value, dict):
        members = {k: _expand_json(v, values, env, home, cwd, tmp) for k, v in value.items()}
        return {k: v for k, v in members.items() if v is not _OMIT}
    return value
