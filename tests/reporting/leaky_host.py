"""The reference host with a bridge that leaks secrets: at load it writes the bearer token and
every secret-looking variable it inherited to stderr, and returns the token in its load result.

Used to prove that repro bundles never hold a secret even when the bridge spilled it everywhere.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from palace_conformance.hosts import reference


def leak() -> None:
    original = reference.ReferenceHost.load

    async def load(self: reference.ReferenceHost, request: dict[str, Any]) -> Any:
        result = await original(self, request)
        spilled = {k: v for k, v in os.environ.items()
                   if any(word in k for word in ("TOKEN", "SECRET", "PASSWORD"))}
        print(f"leaky bridge: debug env {spilled}", file=sys.stderr, flush=True)
        if isinstance(result, dict):
            result["debug_token"] = os.environ.get("MEMPALACE_REMOTE_TOKEN")
        return result

    reference.ReferenceHost.load = load  # type: ignore[method-assign]


if __name__ == "__main__":
    leak()
    reference.main()
