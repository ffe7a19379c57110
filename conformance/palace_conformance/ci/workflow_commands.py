"""GitHub Actions workflow commands (``::error file=F,title=T::message``) and step files, written
by the rules GitHub documents: in a message ``%``, CR and LF are percent-encoded; in a property
value ``:`` and ``,`` are, too (they would end the property). Standard library only."""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Mapping
from pathlib import Path

#: GitHub shows at most 10 error and 10 warning annotations per step; more only clutter the log
MAX_ANNOTATIONS = 10
#: an annotation's message is clipped to this many characters (GitHub truncates long ones)
MAX_MESSAGE = 1000


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def command(kind: str, message: str, **properties: str | None) -> str:
    """One workflow command line (``kind``: error, warning, notice); blank properties left out."""
    shown = ",".join(f"{name}={escape_property(value)}"
                     for name, value in properties.items() if value)
    if len(message) > MAX_MESSAGE:
        message = message[:MAX_MESSAGE - 1] + "…"
    return f"::{kind}{' ' + shown if shown else ''}::{escape_data(message)}"


def append_outputs(path: Path, outputs: Mapping[str, str]) -> None:
    """Append ``name=value`` lines to ``$GITHUB_OUTPUT``; a value holding a newline uses the
    delimiter form with a random delimiter, so no value can end it early."""
    lines = []
    for name, value in outputs.items():
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", name):
            raise ValueError(f"not a step output name: {name!r}")
        if "\n" in value or "\r" in value:
            delimiter = f"EOF_{uuid.uuid4().hex}"
            lines.append(f"{name}<<{delimiter}\n{value}\n{delimiter}")
        else:
            lines.append(f"{name}={value}")
    with path.open("a", encoding="utf-8") as handle:
        handle.write("\n".join(lines) + "\n")


def append_summary(path: Path, markdown: str) -> None:
    with path.open("a", encoding="utf-8") as handle:
        handle.write(markdown.rstrip("\n") + "\n")


def workspace_relative(path: str, workspace: str | None) -> str | None:
    """``path`` relative to the workspace (what an annotation's ``file=`` needs), or None when it
    lies outside it (an annotation cannot point there)."""
    if not path or not workspace:
        return None
    try:
        absolute = Path(path).resolve()
        return absolute.relative_to(Path(workspace).resolve()).as_posix()
    except (OSError, ValueError):
        return None


def github_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables this command reads, from ``environ`` (default: the process's)."""
    environ = os.environ if environ is None else environ
    names = ("GITHUB_STEP_SUMMARY", "GITHUB_OUTPUT", "GITHUB_WORKSPACE", "RUNNER_TEMP",
             "GITHUB_ACTIONS")
    return {name: environ[name] for name in names if environ.get(name)}
