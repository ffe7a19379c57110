"""``python -m mempalace.mcp_server``."""

from . import main

main()
