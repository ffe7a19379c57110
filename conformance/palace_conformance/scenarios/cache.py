"""Scenario files already found valid, remembered across processes so loading skips the schema.

Validating the shipped catalogue against the JSON Schema costs a second or more, and every
``palace-conformance`` command (and every test process) loads it. A file's verdict depends only on
its bytes, its name and its directory's name, the known behaviours and tools, the schemas and the
rules in this package, so a verdict of "no problems" is remembered under a fingerprint of all of
those. Only clean verdicts are kept: a broken file is validated every time, so its problems are
always the loader's own words.

Where: ``$XDG_CACHE_HOME/palace-conformance/scenarios/`` (default ``~/.cache``), one JSON file per
fingerprint, written atomically (temporary file, then ``os.replace``), so parallel processes never
see half a file. A file that cannot be read or parsed, or that names another fingerprint, is
ignored and rewritten; an entry counts only when the file's current SHA-256 matches it. Set
``PALACE_CONFORMANCE_NO_CACHE=1`` to neither read nor write it; deleting the directory is always
safe.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping
from functools import cache
from importlib import metadata
from pathlib import Path
from types import ModuleType

from palace_conformance import __version__
from palace_conformance.cache_home import kit_cache_root

#: set to anything but "" or "0" to neither read nor write the cache
NO_CACHE_ENV = "PALACE_CONFORMANCE_NO_CACHE"
#: bump when the file layout or what a fingerprint covers changes
FORMAT = 1
#: fingerprint files untouched for this long are removed when a new fingerprint is first written
STALE_AFTER_S = 30 * 24 * 3600


def cache_dir() -> Path | None:
    """The directory for validation verdicts, or None when caching is switched off."""
    if os.environ.get(NO_CACHE_ENV, "") not in ("", "0"):
        return None
    root = kit_cache_root()
    return None if root is None else root / "scenarios"


def _versions() -> list[str]:
    found = [f"format {FORMAT}", f"python {sys.version_info[0]}.{sys.version_info[1]}",
             f"palace-conformance {__version__}"]
    for dist in ("jsonschema", "referencing"):  # the validator's behaviour is theirs
        try:
            found.append(f"{dist} {metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            found.append(f"{dist} unknown")
    return found


@cache
def _static_fingerprint(rule_files: tuple[str, ...], schema_dir: str) -> str | None:
    """Versions, rule sources and schemas: what every verdict of this process shares."""
    digest = hashlib.sha256()
    try:
        for part in _versions():
            digest.update(part.encode() + b"\0")
        for name in rule_files:
            digest.update(Path(name).read_bytes() + b"\0")
        for schema in sorted(Path(schema_dir).glob("*.json")):
            digest.update(schema.name.encode() + b"\0" + schema.read_bytes() + b"\0")
    except OSError:
        return None
    return digest.hexdigest()


def fingerprint(rules: Iterable[ModuleType], schema_dir: Path, behaviours: Mapping[str, str],
                tools: Iterable[str]) -> str | None:
    """One hash of everything a verdict depends on besides the file; None if a source is missing
    (then nothing is cached)."""
    files = tuple(getattr(module, "__file__", None) or "" for module in rules)
    if not all(files):
        return None
    static = _static_fingerprint(files, str(schema_dir))
    if static is None:
        return None
    context = json.dumps({"behaviours": sorted(behaviours.items()), "tools": list(tools)},
                         ensure_ascii=False)
    return hashlib.sha256(f"{static}\0{context}".encode()).hexdigest()


def entry_key(path: Path) -> str:
    """What of a file's path its verdict depends on: its name and its directory's name."""
    return f"{path.parent.name}/{path.name}"


def content_hash(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


class ValidationCache:
    """The files known valid under one fingerprint; a no-op when there is no directory."""

    def __init__(self, directory: Path | None, fingerprint: str | None) -> None:
        self.file = (directory / f"{fingerprint}.json"
                     if directory is not None and fingerprint is not None else None)
        self.fingerprint = fingerprint
        self._valid = _read(self.file, fingerprint) if self.file is not None else {}
        self._new: dict[str, str] = {}

    def known_valid(self, path: Path, content: bytes) -> bool:
        """Whether exactly these bytes, under this name, were found valid before."""
        if self.file is None:
            return False
        key = entry_key(path)
        stored = self._new.get(key) or self._valid.get(key)
        return stored is not None and stored == content_hash(content)

    def remember(self, path: Path, content: bytes) -> None:
        if self.file is not None:
            key, value = entry_key(path), content_hash(content)
            if self._valid.get(key) != value:
                self._new[key] = value

    def save(self) -> None:
        """Merge what this process learnt into the file; any failure just leaves it unsaved."""
        if self.file is None or not self._new:
            return
        try:
            self.file.parent.mkdir(parents=True, exist_ok=True)
            first = not self.file.exists()
            # what other processes wrote since we read it stays
            merged = {**_read(self.file, self.fingerprint), **self._new}
            body = json.dumps({"format": FORMAT, "fingerprint": self.fingerprint,
                               "valid": merged}, sort_keys=True)
            handle, temporary = tempfile.mkstemp(dir=self.file.parent, prefix=".tmp-",
                                                 suffix=".json")
            try:
                with os.fdopen(handle, "w", encoding="utf-8") as out:
                    out.write(body)
                os.replace(temporary, self.file)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temporary)
                raise
        except OSError:
            return
        self._valid, self._new = merged, {}
        if first:
            _prune(self.file)


def _read(file: Path, fingerprint: str | None) -> dict[str, str]:
    """The stored entries; anything unreadable, malformed or foreign counts as none."""
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return {}
    if not (isinstance(data, dict) and data.get("format") == FORMAT
            and data.get("fingerprint") == fingerprint and isinstance(data.get("valid"), dict)):
        return {}
    return {key: value for key, value in data["valid"].items()
            if isinstance(key, str) and isinstance(value, str)}


def _prune(kept: Path) -> None:
    """Remove fingerprint files (and stray temporaries) nobody has written for a long time."""
    cutoff = time.time() - STALE_AFTER_S
    with contextlib.suppress(OSError):
        for other in kept.parent.glob("*.json"):
            with contextlib.suppress(OSError):
                if other != kept and other.stat().st_mtime < cutoff:
                    other.unlink()


__all__ = ["NO_CACHE_ENV", "ValidationCache", "cache_dir", "content_hash", "entry_key",
           "fingerprint"]
