"""``palace-conformance fixtures ...`` (placeholder until the fixture loader lands)."""

from __future__ import annotations

import argparse


def add_commands(sub: argparse._SubParsersAction) -> None:
    sub.add_parser("fixtures", help="validate and list scenario fixtures")
