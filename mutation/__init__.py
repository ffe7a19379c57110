"""Mutation testing of the reference bridge with the scenario catalogue as the oracle.

``python -m mutation run`` mutates ``reference/palace_bridge/`` with cosmic-ray, one module at a
time, and judges each mutant by ``palace-conformance run`` over the scenarios covering the
behaviours that module implements (``modules.json``). A dev tool for this checkout, not part of
the shipped kit: it needs the reference bridge's source and cosmic-ray (docs/mutation.md).
"""
