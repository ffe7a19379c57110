"""The kit's command line, the top floor under :mod:`palace_conformance.cli`: one module per
command (``run``, ``replay``/``baseline`` in :mod:`.reports`, ``diff``/``matrix`` in
:mod:`.drift`, ``fake`` with :mod:`.fake_ctl` and :mod:`.fake_journal`, ``fixtures``, ``hosts``,
``profile``, ``merge``, ``record``, ``official``, ``fidelity``, ``selftest``), their shared
option sets (:mod:`.options`) and one-line usage errors (:mod:`.usage`).

The only package that wires the wings to the runner. Argparse only at import time: every command
imports its engine when it runs (a folder rule in pyproject.toml), so ``palace-conformance
--help`` and every fake process, which build the whole parser, stay fast."""
