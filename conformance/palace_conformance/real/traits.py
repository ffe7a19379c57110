"""What the real mempalace 3.11.0 can do for the catalogue, declared as bridges declare theirs
(``scenarios/server_needs.py`` reads each scenario's needs; a run needing more is not applicable).

It can be seeded (through real tool calls), killed (its relay or its HTTP process), and contended
for by a lock holder (the fake's holder takes the real lock file). It cannot inject faults, has no
control API and no stateful HTTP sessions, and its journal holds only what the stdio relay and the
HTTP proxy see, plus the runner's own stand-ins (``helper_run``). It takes 1-2 s to exit after
stdin EOF (more on a loaded machine), so a run that forbids any SIGTERM through the bridge's stop
(whose grace is 2 s) would pass or fail by the machine's load: not applicable either.
"""

from __future__ import annotations

from palace_conformance.scenarios.server_needs import ServerTraits

REAL_SERVER = ServerTraits(
    name="real",
    capabilities=frozenset({"palace_seed", "server_kill", "lock_holder"}),
    journal_kinds=frozenset({"process_start", "process_exit", "signal", "recv", "send",
                             "http_request", "http_response", "helper_run"}),
)
