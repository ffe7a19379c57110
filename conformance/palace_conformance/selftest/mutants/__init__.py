"""The mutant catalogue: the reference bridge with exactly one rule broken, to prove the suite.

A mutant is never an edit to ``palace_bridge``'s files. It is a named set of in-process patches
that the reference host applies at start-up (``python -m palace_conformance.hosts.reference
--mutant NAME``), before the bridge is activated, so the mutant runs the real bridge with one rule
broken, through the real driver protocol, against the real fake. ``palace-conformance selftest``
(:mod:`.selftest`) then runs the scenarios covering the broken behaviour and expects a failure.

A patch names its target as ``module:Qualified.name`` and is built from the original attribute
(``make(original) -> replacement``), so it wraps or replaces exactly one function, method or
constant. :func:`resolve` insists that the target is defined right there (not inherited, not
missing), which is what the catalogue tests check: a refactor that renames a target breaks a
test instead of silently neutering the mutant.

To add a mutant: in the module of its area (``stdio``, ``http``, ``lifecycle``, ``tools``,
``features``), write a ``_make`` function that returns the replacement (same signature as the
original) and add a :class:`Mutant` to that module's ``MUTANTS``, naming the behaviour IDs it
breaks. Kept import-light: ``palace_bridge`` is imported only when a patch is resolved.
"""

from __future__ import annotations

from palace_conformance.selftest.mutants import controls, features, http, lifecycle, stdio, tools
from palace_conformance.selftest.mutants.model import Mutant, MutantError, Patch, apply, resolve

__all__ = ["CONTROLS", "MUTANTS", "Mutant", "MutantError", "Patch", "apply", "find", "resolve"]

#: every mutant, by area, in the order the selftest runs and reports them
MUTANTS: tuple[Mutant, ...] = (*lifecycle.MUTANTS, *tools.MUTANTS, *stdio.MUTANTS, *http.MUTANTS,
                               *features.MUTANTS)
#: deliberately harmless mutants: selecting one must make the selftest fail (it survives)
CONTROLS: tuple[Mutant, ...] = controls.CONTROLS


def find(name: str) -> Mutant:
    """The mutant (or control) called ``name``; :class:`MutantError` naming the choices."""
    for mutant in (*MUTANTS, *CONTROLS):
        if mutant.name == name:
            return mutant
    raise MutantError(f"no mutant named {name!r} (see palace-conformance selftest --list)")
