"""What a bare fake finds on disk: the start state of a fake given no palace state file.

The kit's worlds always hand the fake its palace (``PALACE_FAKE_STATE``, ``--state``). A fake
started by hand (``palace-fake-mcp``, a shim outside a run) has only its HOME, and must start as
the real mempalace 3.11 would there: no palace directory, or one without ``chroma.sqlite3``, is a
fresh palace (its tools answer "No palace found" / "Chroma database missing"); a
``chroma.sqlite3`` without the drawers collection is the half-made palace ("Backend open
failed"); one with it is an initialised palace. The fake cannot read chroma's contents, so an
initialised palace on disk starts empty: its state, not its drawers.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing.TYPE_CHECKING, unimported: pyproject.toml's helper-start contracts

if TYPE_CHECKING:
    from typing import Any

DATABASE = "chroma.sqlite3"
COLLECTION = "mempalace_drawers"


def _has_collection(database: str) -> bool:
    """Whether chroma's ``collections`` table names the drawers collection; a database that
    cannot be read counts as made (the real server would open it)."""
    import sqlite3

    try:
        connection = sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=1.0)
    except sqlite3.Error:
        return True
    try:
        rows = connection.execute("SELECT name FROM collections").fetchall()
    except sqlite3.Error:
        return False  # no collections table yet: chromadb made the file and nothing in it
    finally:
        connection.close()
    return any(row[0] == COLLECTION for row in rows)


def state_on_disk(palace: str) -> dict[str, Any]:
    """The :class:`~palace_conformance.fake.palace.PalaceState` JSON the palace at ``palace``
    starts a bare fake in."""
    if not os.path.isdir(palace):
        return {"initialised": False, "directory": False}
    database = os.path.join(palace, DATABASE)
    if not os.path.isfile(database):
        return {"initialised": False, "directory": True}
    if not _has_collection(database):
        return {"initialised": False, "directory": True, "bare_database": True}
    return {"initialised": True}
