"""Secrets out of every report a run writes, and back in (as fresh values) when a bundle is
replayed.

Reports travel: CI artifacts, issue attachments, chat. So every value a run treats as a secret
is replaced by a numbered marker (``<redacted-secret-1>``) in every file of a bundle, the
fixture included, and in every other report (``--json``/``results.json``, JUnit, Markdown, the
drift report and the matrix, which render from :func:`redacted_run`'s copy of the result).
The secrets are: the fake's bearer token (``http.token``), tokens a
``rotate_token`` step installs, the fixture's ``wire_secrets``, the fixture's ``env`` values whose
names look secret, and secret-looking variables of the runner's own environment (the bridge
inherits those); and any token-shaped string (``ghp_...``, ``sk-...``, a JWT, ...: the
redactor's ``shapes``) becomes ``<redacted-token>``. The same word list decides "looks
secret" as the result model's
:func:`palace_conformance.redaction.redact_env`.

A token in a fixture is only a shared value (the fake requires it, the bridge sends it), so
:func:`restore_markers` gives each marker a fresh random value and the replayed scenario behaves
the same, without the bundle ever holding the original.
"""

from __future__ import annotations

import json
import re
import secrets as random_tokens
from collections.abc import Iterable, Mapping
from typing import Any

# the primitives live in a module the fake may import too (its journal view redacts the same way)
from palace_conformance.redaction import (
    MARKER,
    MIN_ENV_SECRET,
    Redactor,
    environment_secrets,
    scenario_secrets,
    secret_named,
)
from palace_conformance.runner.results import RunResult

__all__ = ["MARKER", "MARKER_PATTERN", "MIN_ENV_SECRET", "Redactor", "environment_secrets",
           "redacted_run", "restore_markers", "run_redactor", "scenario_secrets",
           "secret_named"]

MARKER_PATTERN = re.compile(r"<redacted-secret-(\d+)>")


def run_redactor(raws: Iterable[Mapping[str, Any]],
                 environ: Mapping[str, str] | None = None) -> Redactor:
    """The redactor for a whole run: the secrets of every scenario it ran (their raw fixtures)
    and of the runner's environment."""
    found: list[str] = []
    for raw in raws:
        found.extend(scenario_secrets(raw))
    return Redactor([*found, *environment_secrets(environ)], shapes=True)


def redacted_run(run: RunResult, redactor: Redactor, *, journal: bool = True) -> RunResult:
    """A copy of ``run`` with every secret replaced by its marker, journals included unless
    ``journal`` is false (the copy then has none: ``run``'s reports never show them, and they
    are most of a catalogue's text): what a report is rendered from (the run itself stays as it
    was, for the bundles)."""
    if not redactor.markers and not redactor.shapes:
        return run
    # one pass over the JSON text (the redactor knows each secret's JSON-escaped form too): a
    # fraction of walking every string of a whole catalogue's results
    text = json.dumps(run.to_json(journal=journal), ensure_ascii=False, default=str)
    return RunResult.from_json(json.loads(redactor.text(text)))


def restore_markers(value: Any, fresh: dict[str, str] | None = None) -> Any:
    """``value`` with each marker replaced by a fresh random token (the same marker always gets
    the same token); ``fresh`` collects the mapping."""
    fresh = {} if fresh is None else fresh

    def swap(match: re.Match[str]) -> str:
        marker = match.group(0)
        if marker not in fresh:
            fresh[marker] = f"replay-secret-{match.group(1)}-{random_tokens.token_hex(6)}"
        return fresh[marker]

    if isinstance(value, str):
        return MARKER_PATTERN.sub(swap, value)
    if isinstance(value, dict):
        return {k: restore_markers(v, fresh) for k, v in value.items()}
    if isinstance(value, list):
        return [restore_markers(v, fresh) for v in value]
    return value
