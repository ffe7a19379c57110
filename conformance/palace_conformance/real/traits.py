"""What the real mempalace 3.11.0 can do for the catalogue, declared as bridges declare theirs
(``scenarios/server_needs.py`` reads each scenario's needs; a run needing more is not applicable).

It can be seeded (through real tool calls), killed (its relay), and contended for by a lock
holder (the fake's holder takes the real lock file). Its faults are injected by the fault relays
in front of it (``relay/fault_stdio.py``, ``relay/fault_http.py``), which also keep the HTTP
session table and serve the control API the fake serves, and journal what the fake journals for
the wire and its faults; the fake's palace-internal records (a lease taken, a dispatch error) are
not among them. It takes 1-2 s to exit after
stdin EOF (more on a loaded machine), so a run that forbids any SIGTERM through the bridge's stop
(whose grace is 2 s) would pass or fail by the machine's load: not applicable either.
"""

from __future__ import annotations

from palace_conformance.scenarios.server_needs import ServerTraits

REAL_SERVER = ServerTraits(
    name="real",
    capabilities=frozenset({"palace_seed", "server_kill", "lock_holder", "fault_injection",
                            "stateful_sessions", "control_api"}),
    journal_kinds=frozenset({"process_start", "process_exit", "signal", "recv", "send",
                             "http_request", "http_response", "helper_run", "fault",
                             "stall_end", "descendant_start", "descendant_exit", "session",
                             "control", "http_closed",
                             "http_dropped", "http_withheld", "http_resumed", "http_decoy",
                             "http_garbage_event", "http_invalid_utf8", "http_token_rotated",
                             "http_error"}),
)
