"""The conformance runner: runs scenario fixtures against a bridge host and says where it departs.

Kept import-free on purpose: the runner's helper stand-ins live in this package and are started
with ``python -S`` on every helper run, so importing the package must cost nothing.

Modules: :mod:`.results` (the typed result model), :mod:`.driver` (the driver-protocol client),
:mod:`.world` (one run's private world: temp dir, shims, fake, lock holder), :mod:`.execute`
(one scenario on one transport), :mod:`.judge` (expectations to check records),
:mod:`.normalise` and :mod:`.parity` (cross-transport comparison), :mod:`.suite` (many runs in
parallel), :mod:`.commands` (``palace-conformance run``).

Reporting: :mod:`.markdown` (PR summary), :mod:`.trace` (normalised traces), :mod:`.bundle`,
:mod:`.redact` and :mod:`.replay` (repro bundles), :mod:`.baseline` (expected failures),
:mod:`.reporting` (what ``--report-dir`` writes besides JSON/JUnit), :mod:`.report_commands`
(``replay``, ``baseline update``), :mod:`.pytest_plugin`.
"""
