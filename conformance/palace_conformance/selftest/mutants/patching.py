"""Building blocks the area modules share: patch targets, config overrides, a mutant shorthand."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from palace_conformance.errors import ConformanceError
from palace_conformance.selftest.mutants.model import Make, Mutant, Patch


def state(name: str) -> Any:
    from palace_bridge.respawn import ChildState

    return ChildState[name]


class NeverRaised(ConformanceError):
    """Put in place of an exception class an ``except`` clause names: it then catches nothing."""


def never_caught(original: Any) -> Any:
    return NeverRaised


def answers(value: Any) -> Make:
    """A function or method that does nothing and returns ``value``; called as the original is
    (its name and signature kept)."""

    def make(original: Any) -> Any:
        @functools.wraps(original)
        def answer(*args: Any, **kwargs: Any) -> Any:
            return value

        return answer

    return make


def answers_later(value: Any) -> Make:
    """:func:`answers` for a coroutine function: awaited, it does nothing and returns ``value``."""

    def make(original: Any) -> Any:
        @functools.wraps(original)
        async def answer(*args: Any, **kwargs: Any) -> Any:
            return value

        return answer

    return make


def succeeded_on(*names: str) -> Make:
    """An outcome's ``succeeded`` property, true for the outcomes ``names``."""

    def make(original: Any) -> Any:
        def succeeded(self: Any) -> bool:
            return self.name in names

        return property(succeeded)

    return make


def fields_forced(**changes: Any) -> Make:
    """A dataclass's classmethod constructor (``BridgeConfig.from_env``,
    ``FeedSettings.from_config``) with some fields of what it makes forced."""

    def make(original: Any) -> Any:
        construct = original.__func__

        @functools.wraps(construct)  # the original's signature: (cls, env) or (cls, config)
        def forced(cls: Any, source: Any) -> Any:
            return dataclasses.replace(construct(cls, source), **changes)

        return classmethod(forced)

    return make


LOCAL = "palace_bridge.local"
STDIO = "palace_bridge.stdio"
RESPAWN = "palace_bridge.respawn"
REMOTE = "palace_bridge.remote"
SESSION = "palace_bridge.session"
FEEDING = "palace_bridge.features.feeding"
MAILBOX = "palace_bridge.features.mailbox"
CONFIG = "palace_bridge.config:BridgeConfig.from_env"


def mutant(name: str, breaks: str, description: str, *patches: tuple[str, Make],
       also: tuple[str, ...] = ()) -> Mutant:
    return Mutant(name, tuple(breaks.split()), description,
                  tuple(Patch(target, make) for target, make in patches), also)
