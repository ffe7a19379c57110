"""The fake palace's ``mempalace_sync``, as mempalace 3.11.0's ``sync_palace`` answers it.

Read from 3.11's ``mempalace/sync.py`` and ``miner.py`` and checked against the real server
(``tests/real/test_half_made_real.py``, 2026-12-07). Without ``project_dir`` the project roots
are guessed from the drawers' own sources: for each absolute ``source_file`` the deepest ancestor
holding a ``.git`` (any kind) or a ``.gitignore`` file; with none, every such drawer is out of
scope. A row is then classified by its source (no source, out of scope, kept, gitignored by the
``.gitignore`` files from its root down to its directory, or gone); a gone file is ``missing``
when a kept or ignored source of the same directory (as its metadata spells it) is a regular file
still, else ``unresolved``. ``apply`` removes the ``missing`` and ``gitignored`` rows and the
closets of every source left with no row.

Not modelled, as nothing the kit or its generator does reaches it: 3.11's ``source_dir_ino``
check (a directory replaced or mounted over since the mine keeps its drawers as ``unresolved``);
the fake's directories never change identity under a palace.
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
import stat
from pathlib import Path
from typing import Any

from palace_conformance.fake.palace import PalaceState, half_make, tool

SYNC_APPLY_NEEDS_SCOPE = ("sync apply requires explicit wing= or project_dirs= so it cannot "
                          "auto-prune every wing in a multi-project palace; pass --wing or a "
                          "project directory")
WHERE_OPERATORS = "$gt, $gte, $lt, $lte, $ne, $eq, $in, $nin, $contains, $not_contains"
COUNTS = ("scanned", "kept", "gitignored", "missing", "unresolved", "no_source", "out_of_scope")
Rule = dict[str, Any]


@tool("mempalace_sync", writes=True)
def _sync(state: PalaceState, args: dict[str, Any]) -> dict[str, Any]:
    project, wing, apply = args.get("project_dir"), args.get("wing"), bool(args.get("apply"))
    if apply and not wing and not project:  # 3.11 refuses this before it opens anything
        return {"success": False, "error": SYNC_APPLY_NEEDS_SCOPE}
    if not state.initialised:
        # 3.11 opens the collection before it looks at its arguments; on a fresh palace that
        # fails with the palace's path as the reason, and half-makes it like search does
        half_make(state)
        return {"success": False, "error": f"sync failed: {args['__palace__']}"}
    if project is not None and not isinstance(project, str):
        return {"success": False, "error": "sync failed: expected str, bytes or os.PathLike "
                                           f"object, not {type(project).__name__}"}
    try:  # 3.11 resolves a given project_dir before it reads a drawer
        given = [Path(project).resolve()] if project else None
    except ValueError as exc:  # a NUL byte
        return {"success": False, "error": str(exc)}
    if (problem := _where_problem(wing)) is not None:
        return {"success": False, "error": problem}
    rows = [d for d in state.drawers if not wing or d["wing"] == wing]
    roots = _sorted_roots(given if given is not None else _guessed_roots(rows))
    report, removable = sync_report(rows, roots)
    report["dry_run"] = not apply
    if apply and removable:
        report["removed_drawers"] = len(removable)
        report["removed_closets"] = _remove(state, removable)
    return {"success": True, **report}


def _where_problem(wing: Any) -> str | None:
    """chromadb's complaint about a non-empty list or object as sync's wing (3.11 puts the
    wing into a where clause as it is)."""
    if isinstance(wing, list) and wing:
        return ("Expected where value to be a str, int, float, or operator expression, "
                f"got {wing!r} in get.")
    if isinstance(wing, dict) and wing:
        return (f"Expected where operator to be one of {WHERE_OPERATORS}, "
                f"got {next(iter(wing))} in get.")
    return None


def _sorted_roots(roots: list[Path]) -> list[Path]:
    """Deepest first, so a source's root is the first it lies under (3.11's order)."""
    return sorted(set(roots), key=lambda p: (-len(str(p)), str(p)))


def _guessed_roots(rows: list[dict[str, Any]]) -> list[Path]:
    """3.11's ``_auto_detect_project_roots``: per absolute source, its deepest ancestor that
    holds a ``.git`` or a ``.gitignore`` file (the ancestors as the source spells them)."""
    roots: list[Path] = []
    for source in dict.fromkeys(str(d.get("source_file") or "") for d in rows):
        if not source or not Path(source).is_absolute():
            continue
        for parent in Path(source).parents:
            if _marked(parent):
                with contextlib.suppress(OSError, RuntimeError, ValueError):
                    roots.append(parent.resolve(strict=False))
                break
    return roots


def _marked(directory: Path) -> bool:
    try:
        if (directory / ".git").exists():
            return True
    except (OSError, RuntimeError, ValueError):
        pass
    try:
        return (directory / ".gitignore").is_file()
    except (OSError, RuntimeError, ValueError):
        return False


def _registry_row(row: dict[str, Any]) -> bool:
    """A convo miner's sentinel, which sync always keeps."""
    return (row.get("room") == "_registry" or row.get("ingest_mode") == "registry"
            or str(row["id"]).startswith("_reg_"))


def sync_report(rows: list[dict[str, Any]],
                roots: list[Path]) -> tuple[dict[str, Any], list[str]]:
    """3.11's dry-run report of ``rows`` against the project ``roots`` (deepest first), and
    the ids an apply removes."""
    counts = dict.fromkeys(COUNTS, 0)
    by_source: dict[str, int] = {}
    unresolved_by_source: dict[str, int] = {}
    removable: list[str] = []
    verdicts: dict[str, str] = {}
    witnesses: dict[str, dict[str, None]] = {}  # directory (as spelt) -> its present sources
    gone: list[tuple[str, str]] = []
    for row in rows:
        counts["scanned"] += 1
        source = str(row.get("source_file") or "")
        registry = _registry_row(row)
        if registry:
            bucket = "kept"
        elif not source:
            bucket = "no_source"
        else:
            if source not in verdicts:
                verdicts[source] = classify(source, roots)
            bucket = verdicts[source]
        if bucket == "absent":
            gone.append((row["id"], source))
            continue
        if source and not registry and bucket in ("kept", "gitignored"):
            witnesses.setdefault(os.path.dirname(source), {})[source] = None
        counts[bucket] += 1
        if bucket == "unresolved":
            unresolved_by_source[source] = unresolved_by_source.get(source, 0) + 1
        if bucket == "gitignored":
            removable.append(row["id"])
            by_source[source] = by_source.get(source, 0) + 1
    settled: dict[str, bool] = {}
    for drawer_id, source in gone:
        if source not in settled:
            settled[source] = (any(_regular_file(w) for w in
                                   witnesses.get(os.path.dirname(source), ()))
                               and _state(source) == "not_there")
        bucket = "missing" if settled[source] else "unresolved"
        counts[bucket] += 1
        tally = by_source if settled[source] else unresolved_by_source
        tally[source] = tally.get(source, 0) + 1
        if settled[source]:
            removable.append(drawer_id)
    return ({**counts, "removed_drawers": 0, "removed_closets": 0, "dry_run": True,
             "by_source": by_source, "unresolved_by_source": unresolved_by_source}, removable)


def classify(source: str, roots: list[Path]) -> str:
    """One source's bucket, as 3.11's ``_classify_drawer`` (``absent`` is settled later)."""
    if not Path(source).is_absolute():
        return "no_source"
    try:
        path = Path(source).resolve(strict=False)
    except (OSError, RuntimeError, ValueError):
        return "unresolved"
    root = next((root for root in roots if path.is_relative_to(root)), None)
    if root is None:
        return "out_of_scope"
    state = _state(str(path))
    if state != "present":
        return "absent" if state == "not_there" else "unresolved"
    return "gitignored" if gitignored(path, root) else "kept"


def _state(path: str) -> str:
    try:
        os.stat(path)
    except FileNotFoundError:
        return "not_there"
    except (OSError, ValueError):
        return "unknown"
    return "present"


def _regular_file(path: str) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def _remove(state: PalaceState, removable: list[str]) -> int:
    """Remove the rows ``removable`` names; the closets purged with them (those of every source
    left with no row but bookkeeping ones, as 3.11 asks the palace after the deletion)."""
    gone = set(removable)
    removed = [d for d in state.drawers if d["id"] in gone]
    state.drawers = [d for d in state.drawers if d["id"] not in gone]
    closets = 0
    for source in sorted({str(d.get("source_file") or "") for d in removed}):
        held = sum(int(d.get("closets", 0)) for d in removed if d.get("source_file") == source)
        survivors = [d for d in state.drawers if d.get("source_file") == source]
        if any(not _bookkeeping(d) for d in survivors):
            # the source's closet stays: the fake keeps it on a row of the source still filed
            survivors[0]["closets"] = int(survivors[0].get("closets", 0)) + held
        else:
            closets += held
    return closets


def _bookkeeping(row: dict[str, Any]) -> bool:
    return _registry_row(row) or bool(row.get("is_sentinel")) \
        or str(row["id"]).startswith("sentinel_")


# --- 3.11's .gitignore reading (miner.GitignoreMatcher) ------------------------------------


def gitignored(path: Path, root: Path) -> bool:
    """Whether the ``.gitignore`` files from ``root`` down to ``path``'s directory ignore it:
    the last rule that matches wins, a nearer file's over a farther one's."""
    ignored = False
    folders = [root]
    for part in path.relative_to(root).parts[:-1]:
        folders.append(folders[-1] / part)
    for folder in folders:
        rules = _rules(folder)
        decision = _decide(rules, path, folder) if rules else None
        if decision is not None:
            ignored = decision
    return ignored


def _rules(folder: Path) -> list[Rule]:
    ignore = folder / ".gitignore"
    try:
        if not ignore.is_file():
            return []
        lines = ignore.read_text(encoding="utf-8", errors="replace").splitlines()
    except Exception:  # 3.11 reads an unreadable file as no rules
        return []
    return [rule for line in lines if (rule := _rule(line)) is not None]


def _rule(raw: str) -> Rule | None:
    line = raw.strip()
    if not line:
        return None
    if line.startswith(("\\#", "\\!")):
        line = line[1:]
    elif line.startswith("#"):
        return None
    negated = line.startswith("!")
    line = line[1:] if negated else line
    anchored = line.startswith("/")
    line = line.lstrip("/") if anchored else line
    dir_only = line.endswith("/")
    line = line.rstrip("/") if dir_only else line
    if not line:
        return None
    return {"pattern": line, "anchored": anchored, "dir_only": dir_only, "negated": negated}


def _decide(rules: list[Rule], path: Path, base: Path) -> bool | None:
    relative = path.relative_to(base).as_posix().strip("/")
    if not relative:
        return None
    ignored = None
    for rule in rules:
        if _rule_matches(rule, relative.split("/")):
            ignored = not rule["negated"]
    return ignored


def _rule_matches(rule: Rule, parts: list[str]) -> bool:
    """One rule against a file's path parts (sync asks about files only)."""
    pattern = rule["pattern"]
    pattern_parts = pattern.split("/")
    targets = parts[:-1] if rule["dir_only"] else parts
    if not targets:
        return False
    if rule["anchored"] or len(pattern_parts) > 1:
        return _from_root(targets, pattern_parts)
    return any(fnmatch.fnmatch(part, pattern) for part in targets)


def _from_root(targets: list[str], pattern_parts: list[str]) -> bool:
    def matches(at: int, pattern_at: int) -> bool:
        if pattern_at == len(pattern_parts):
            return True
        if at == len(targets):
            return all(part == "**" for part in pattern_parts[pattern_at:])
        if pattern_parts[pattern_at] == "**":
            return matches(at, pattern_at + 1) or matches(at + 1, pattern_at)
        if not fnmatch.fnmatch(targets[at], pattern_parts[pattern_at]):
            return False
        return matches(at + 1, pattern_at + 1)

    return matches(0, 0)
