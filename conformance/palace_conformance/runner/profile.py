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

import json
import math
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from palace_conformance.scenarios.paths import (
    RESERVED_IN_HOME,
    RESERVED_IN_RUN,
    reserved_env_problem,
    reserved_problem,
)

PROFILE_SCHEMA = "bridge-profile.schema.json"
PROFILE_MAX_BYTES = 4 * 1024 * 1024  # a profile is a few KiB; files' contents included
_PLACEHOLDER = re.compile(r"\$\{(FAKE_URL|FAKE_TOKEN|TMP|HOME|CWD|ENV:[A-Za-z_][A-Za-z0-9_]*)\}")


class ProfileError(ValueError):
    """A profile that cannot be used; the message is one line naming the file, the problem and
    the fix."""


@dataclass(frozen=True)
class Knob:
    """What a bridge has in place of one of the seed's variables."""

    env: str | None = None  # its own variable
    unit: str = "ms"  # "s": it reads seconds where the seed reads milliseconds
    fixed: int | str | None = None  # no knob: this constant is what it does
    absent: bool = False  # neither knob nor behaviour


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
    tool_map: Mapping[str, str] = field(default_factory=dict)
    extra_tools_allowed: bool = False
    wakeup_channel: str = "message"
    diagnostics_channel: str = "stderr"
    errors_channel: str | None = None  # "throw" | "is_error"; None: either, at the core level

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
            if knob.absent:
                return out, f"the scenario sets {name}, which this bridge has no equivalent of"
            if knob.fixed is not None:
                if str(knob.fixed) != value:
                    return out, (f"the scenario needs {name}={value}; this bridge's is fixed at "
                                 f"{knob.fixed}")
                continue
            if knob.env is not None:
                out[knob.env] = _convert(value, knob.unit)
        return out, None

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
        raise ProfileError(f"profile {source} at {first.pointer}: {first.message}; "
                           f"{first.fix}{more}")
    for item in data.get("files", []):
        _check_file_path(source, item["path"])
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
                          absent=bool(k.get("absent", False)))
               for name, k in data.get("knobs", {}).items()},
        files=tuple(ProfileFile(f["path"], f.get("content"), f.get("json"),
                                int(f.get("mode", "0600"), 8), f.get("when", "always"))
                    for f in data.get("files", [])),
        path_programs=tuple(data.get("path_programs", ())),
        tool_map=dict(tools.get("map", {})),
        extra_tools_allowed=bool(tools.get("extra_allowed", False)),
        wakeup_channel=channels.get("wakeup", "message"),
        diagnostics_channel=channels.get("diagnostics", "stderr"),
        errors_channel=channels.get("errors"),
    )


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


def _expand(text: str, values: Mapping[str, str], env: Mapping[str, str], home: Path,
            cwd: Path, tmp: Path) -> str:
    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        if name.startswith("ENV:"):
            return env.get(name[4:], "")
        return {"HOME": str(home), "CWD": str(cwd), "TMP": str(tmp)}.get(name) \
            or values.get(name, "")

    return _PLACEHOLDER.sub(one, text)


def _expand_json(value: Any, values: Mapping[str, str], env: Mapping[str, str], home: Path,
                 cwd: Path, tmp: Path) -> Any:
    if isinstance(value, str):
        return _expand(value, values, env, home, cwd, tmp)
    if isinstance(value, list):
        return [_expand_json(v, values, env, home, cwd, tmp) for v in value]
    if isinstance(value, dict):
        return {k: _expand_json(v, values, env, home, cwd, tmp) for k, v in value.items()}
    return value
