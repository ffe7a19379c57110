"""The runner's command line: argparse and one-line usage errors only (:mod:`.usage`). ``run``
(:mod:`.run`), ``replay`` and ``baseline`` (:mod:`.reports`), ``diff`` and ``matrix``
(:mod:`.drift`) import their engines when they run, so ``palace-conformance --help`` stays fast."""
