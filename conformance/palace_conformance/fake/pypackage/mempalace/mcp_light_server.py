"""``mempalace-light-mcp`` (``mempalace.mcp_light_server:main``): the fake stdio server with the
light server's 3-tool catalogue and ``serverInfo`` name ``mempalace-light``."""

from __future__ import annotations

from ._serve import serve


def main() -> None:
    serve("light")


if __name__ == "__main__":
    main()
