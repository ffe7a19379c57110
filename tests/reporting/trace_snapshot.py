"""The syrupy extension for trace snapshots: plain JSON files in ``tests/snapshots/``, one per
scenario and transport (``<scenario>--<transport>.json``), so a runner in another language can
read the same goldens."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from syrupy.extensions.json import JSONSnapshotExtension

SNAPSHOTS = Path(__file__).resolve().parent.parent / "snapshots"


class TraceSnapshot(JSONSnapshotExtension):
    @classmethod
    def dirname(cls, *, test_location: Any) -> str:
        return str(SNAPSHOTS)

    @classmethod
    def get_snapshot_name(cls, *, test_location: Any, index: Any = 0) -> str:
        """The test's parameter id (``<scenario>--<transport>``), not the test's name."""
        name = str(test_location.snapshot_name)
        return name[name.index("[") + 1:-1] if name.endswith("]") and "[" in name else name
