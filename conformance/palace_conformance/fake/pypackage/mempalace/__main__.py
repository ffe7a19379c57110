"""``python -m mempalace <command>``: the fake ``mempalace`` CLI (see :mod:`mempalace.cli`)."""

from .cli import main

main()
