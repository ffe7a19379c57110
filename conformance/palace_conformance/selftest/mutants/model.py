"""What a mutant is: named patches of the reference bridge, resolved and applied in process."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from palace_conformance.errors import UserError

Make = Callable[[Any], Any]


class MutantError(UserError):
    """An unknown mutant or a patch target that does not exist (any more); one line."""


@dataclass(frozen=True)
class Patch:
    """Replace ``target`` (``module:Qualified.name``) with ``make(original)``."""

    target: str
    make: Make

    @property
    def module(self) -> str:
        return self.target.partition(":")[0]

    @property
    def path(self) -> tuple[str, ...]:
        return tuple(self.target.partition(":")[2].split("."))


@dataclass(frozen=True)
class Mutant:
    """The reference bridge with one rule broken.

    ``breaks``: the behaviour IDs whose scenarios must kill it (its selection is every scenario
    covering one of them, plus ``also``). ``control`` marks a deliberately harmless patch used to
    show that the selftest itself can fail; controls never run by default.
    """

    name: str
    breaks: tuple[str, ...]
    description: str
    patches: tuple[Patch, ...]
    also: tuple[str, ...] = ()
    control: bool = False


def resolve(patch: Patch) -> tuple[Any, str, Any]:
    """``(owner, attribute, original)``; :class:`MutantError` when the target is not there.

    The attribute must be defined on its owner itself (``vars(owner)``): a method inherited or
    moved elsewhere would be patched in the wrong place and the mutant would break nothing.
    """
    if ":" not in patch.target or not all(patch.path):
        raise MutantError(f"patch target {patch.target!r} is not 'module:Qualified.name'")
    try:
        owner: Any = importlib.import_module(patch.module)
    except ImportError as exc:
        raise MutantError(f"patch target {patch.target}: cannot import {patch.module} "
                          f"({exc})") from None
    *parents, name = patch.path
    for part in parents:
        owner = vars(owner).get(part) if hasattr(owner, "__dict__") else None
        if owner is None:
            raise MutantError(f"patch target {patch.target}: {part} not found in {patch.module}")
    if name not in vars(owner):
        raise MutantError(f"patch target {patch.target}: {name} is not defined there (renamed "
                          "or moved? update the mutant)")
    return owner, name, vars(owner)[name]


def apply(mutant: Mutant) -> None:
    """Patch the running process; every target is resolved before anything is changed."""
    planned = [(resolve(p), p) for p in mutant.patches]
    for (owner, name, original), patch in planned:
        setattr(owner, name, patch.make(original))
