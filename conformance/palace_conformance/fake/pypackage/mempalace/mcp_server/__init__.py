"""``python -m mempalace.mcp_server``: the full server, as ``mempalace-mcp`` runs it when no hub
is live (``mempalace.mcp_server.main``)."""

from __future__ import annotations

from .._serve import serve


def main() -> None:
    serve()
