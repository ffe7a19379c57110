"""The official MCP conformance suite (npm ``@modelcontextprotocol/conformance``, pinned) run by
the kit: its server scenarios against the fake and the real mempalace (same verdicts, same masked
checks), its client scenarios against the reference bridge through :mod:`.adapter`.

``suite`` installs and runs it, ``targets`` starts the servers, ``results`` reads, masks and
compares ``checks.json``, ``baseline`` holds the expected verdicts; the command line is
:mod:`palace_conformance.commands.official`.
"""
