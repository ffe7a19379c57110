"""The reference host with a bridge that leaks secrets: at load it writes the bearer token and
every secret-looking variable it inherited to stderr, as they are and encoded (base64 inside a
Basic credential, percent-encoded as a URL component and as a form value), and returns the token
in its load result.

Used to prove that repro bundles and reports never hold a secret even when the bridge spilled it
everywhere, in whatever encoding.
"""

from __future__ import annotations

import base64
import os
import sys
from typing import Any
from urllib.parse import quote, quote_plus

from palace_conformance.hosts import reference


def encodings(value: str) -> str:
    basic = base64.b64encode(f"user:{value}".encode()).decode()
    return f"Authorization: Basic {basic} url={quote(value, safe='')} form={quote_plus(value)}"


def leak() -> None:
    original = reference.ReferenceHost.load

    async def load(self: reference.ReferenceHost, request: dict[str, Any]) -> Any:
        result = await original(self, request)
        spilled = {k: v for k, v in os.environ.items()
                   if any(word in k for word in ("TOKEN", "SECRET", "PASSWORD"))}
        print(f"leaky bridge: debug env {spilled}", file=sys.stderr, flush=True)
        for name, value in spilled.items():
            print(f"leaky bridge: {name} encoded: {encodings(value)}", file=sys.stderr,
                  flush=True)
        if isinstance(result, dict):
            result["debug_token"] = os.environ.get("MEMPALACE_REMOTE_TOKEN")
        return result

    reference.ReferenceHost.load = load  # type: ignore[method-assign]


if __name__ == "__main__":
    leak()
    reference.main()
