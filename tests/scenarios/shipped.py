"""The shipped catalogue, loaded once per test process (loading validates every file)."""

from __future__ import annotations

from functools import cache

from palace_conformance.scenarios.loader import Catalogue, load_catalogue
from palace_conformance.scenarios.model import Scenario


@cache
def catalogue() -> Catalogue:
    return load_catalogue()


def scenario(sid: str) -> Scenario:
    return next(s for s in catalogue().scenarios if s.id == sid)
