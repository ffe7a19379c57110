"""Named fault presets (``fixtures/fake-presets.json``): the faults a person reproduces against
their own harness, by name, without knowing the compact fault syntax.

A preset is data so that any runner (and the docs) can read it; this module loads it, checks
every spec parses and can fire on each transport the preset lists, and resolves a name typed on a
command line or in ``PALACE_FAKE_PRESET``. Loaded only when a preset is asked for: the shim's
cold start does not pay for it otherwise.

Besides server faults a preset may script the helper stand-ins ``install-shim`` places next to
the server (``standins``: program name -> the step that stand-in's own plan takes, e.g.
``{"mode": "hang"}`` for ``mempalace-pi-session``); the stand-in reads it from the same
``PALACE_FAKE_PRESET``. A preset with no server faults is reached only through the shims.
"""

from __future__ import annotations

import difflib
import json
from functools import cache
from typing import Any

from palace_conformance.contract import (
    FEED_SESSION_MODES,
    FEED_SESSION_PROGRAM,
    FEED_SESSION_STEP_KEYS,
)
from palace_conformance.fake.faults import (
    FakeSetupError,
    Fault,
    FaultPlanError,
    check_transport,
    parse_compact,
)
from palace_conformance.resources import fixtures_dir

PRESETS_FILE = "fake-presets.json"
TRANSPORTS = ("stdio", "http")
#: stand-in program -> (the step keys it takes, the modes it knows): feed_session's plan steps
STANDIN_STEPS: dict[str, tuple[frozenset[str], tuple[str, ...]]] = {
    FEED_SESSION_PROGRAM: (frozenset(FEED_SESSION_STEP_KEYS), FEED_SESSION_MODES),
}


class Preset:
    """One named preset: its fault specs, what it does, where it fires, server options."""

    __slots__ = ("description", "faults", "name", "sessions", "standins", "transports")

    def __init__(self, name: str, description: str, transports: tuple[str, ...],
                 faults: tuple[str, ...], sessions: bool = False,
                 standins: dict[str, dict[str, Any]] | None = None) -> None:
        self.name = name
        self.description = description
        self.transports = transports
        self.faults = faults
        self.sessions = sessions
        self.standins: dict[str, dict[str, Any]] = dict(standins or {})

    def require_server_faults(self) -> None:
        """For a command that serves or arms the preset by name: one that only scripts a
        stand-in would change nothing there, so it is one line naming ``install-shim``."""
        if not self.faults:
            raise FakeSetupError(f"preset {self.name!r} scripts the {', '.join(self.standins)} "
                                 "stand-in, not the server; run 'palace-conformance fake "
                                 f"install-shim DIR --preset {self.name}' and put DIR first on "
                                 "the harness's PATH")

    def parsed(self, transport: str) -> list[Fault]:
        """The faults, checked for ``transport``; a preset for the other transport is one line."""
        if transport not in self.transports:
            raise FakeSetupError(f"preset {self.name!r} fires only over "
                                 f"{' and '.join(self.transports)}, and this fake serves "
                                 f"{transport}; 'palace-conformance fake presets' lists each "
                                 "preset's transports")
        faults = []
        for index, spec in enumerate(self.faults):
            typed = parse_compact(spec, index)
            fault = Fault(f"preset-{self.name}-{index + 1}", typed.on, typed.action,
                          typed.times, typed.params)
            check_transport(fault, transport, f"preset {self.name!r}")
            faults.append(fault)
        return faults


def _preset(name: str, data: Any, source: str) -> Preset:
    where = f"{source}: preset {name!r}"
    if not isinstance(data, dict):
        raise FaultPlanError(f"{where}: expected an object")
    description, transports, specs = (data.get("description"), data.get("transports"),
                                      data.get("faults"))
    if not isinstance(description, str) or not description or "\n" in description:
        raise FaultPlanError(f"{where}: 'description' must be one line of text")
    if (not isinstance(transports, list) or not transports
            or any(t not in TRANSPORTS for t in transports)):
        raise FaultPlanError(f"{where}: 'transports' must list stdio and/or http")
    standins = _standins(data.get("standins", {}), where)
    if specs is None and standins:
        specs = []  # a stand-in-only preset: the server runs clean
    elif not isinstance(specs, list) or not specs or not all(isinstance(s, str) for s in specs):
        raise FaultPlanError(f"{where}: 'faults' must be a non-empty list of compact specs "
                             "(leave it out when 'standins' scripts a stand-in)")
    http = data.get("http") or {}
    preset = Preset(name, description, tuple(transports), tuple(specs),
                    sessions=bool(http.get("sessions")) if isinstance(http, dict) else False,
                    standins=standins)
    for transport in preset.transports:
        try:
            preset.parsed(transport)
        except FaultPlanError as exc:
            raise FaultPlanError(f"{where}: {exc}") from None
    return preset


def _standins(data: Any, where: str) -> dict[str, dict[str, Any]]:
    """``standins``: each a known stand-in and one step of its plan, checked here so a typo
    is refused when the file loads, not when a harness first runs the stand-in."""
    if not isinstance(data, dict):
        raise FaultPlanError(f"{where}: 'standins' must be an object (program -> step)")
    for program, step in data.items():
        if program not in STANDIN_STEPS:
            raise FaultPlanError(f"{where}: no stand-in {program!r}; use one of "
                                 f"{', '.join(STANDIN_STEPS)}")
        keys, modes = STANDIN_STEPS[program]
        if not isinstance(step, dict) or not step or not set(step) <= keys:
            raise FaultPlanError(f"{where}: standins.{program} must be an object of "
                                 f"{', '.join(sorted(keys))}")
        if "mode" in step and step["mode"] not in modes:
            raise FaultPlanError(f"{where}: standins.{program}.mode must be one of "
                                 f"{', '.join(modes)}")
        for key, top in (("delay_ms", None), ("exit", 255)):
            value = step.get(key, 0)
            if (not isinstance(value, int) or isinstance(value, bool) or value < 0
                    or (top is not None and value > top)):
                raise FaultPlanError(f"{where}: standins.{program}.{key} must be an integer "
                                     f">= 0{f' and <= {top}' if top else ''}")
    return {program: dict(step) for program, step in data.items()}


def presets_from_json(data: Any, source: str = PRESETS_FILE) -> dict[str, Preset]:
    """Every preset of a presets document, each checked on each of its transports."""
    if not isinstance(data, dict) or not isinstance(data.get("presets"), dict):
        raise FaultPlanError(f"{source}: expected an object with 'presets'")
    return {name: _preset(name, item, source) for name, item in data["presets"].items()}


@cache
def load_presets() -> dict[str, Preset]:
    """The shipped presets, by name, in file order."""
    path = fixtures_dir() / PRESETS_FILE
    return presets_from_json(json.loads(path.read_text(encoding="utf-8")), str(path))


def find_preset(name: str) -> Preset:
    """The preset called ``name``; an unknown name is one line naming the nearest."""
    presets = load_presets()
    if name in presets:
        return presets[name]
    close = difflib.get_close_matches(name, list(presets), n=1, cutoff=0.5)
    hint = f"did you mean {close[0]!r}?" if close else f"use one of {', '.join(presets)}"
    raise FakeSetupError(f"unknown preset {name!r}; {hint} ('palace-conformance fake presets' "
                         "lists them)")


def presets_table() -> str:
    """One line per preset: name, transports, description (``fake presets``)."""
    presets = load_presets()
    width = max(len(name) for name in presets)
    return "\n".join(f"{p.name:<{width}}  {'/'.join(p.transports):<10}  {p.description}"
                     for p in presets.values())
