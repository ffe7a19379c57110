"""``mempalace-mcp`` (``mempalace.mcp_proxy:main``): the fake stdio server, full catalogue.

The real one proxies to a live HTTP hub when one is registered; the fake never does."""

from __future__ import annotations

from ._serve import serve


def main() -> None:
    serve()


if __name__ == "__main__":
    main()
