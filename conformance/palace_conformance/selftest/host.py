"""The reference host with one mutant of the bridge: ``python -m palace_conformance.selftest.host
--mutant NAME`` patches ``palace_bridge`` in this process (:mod:`.mutants`), before anything is
activated, then serves exactly as :mod:`palace_conformance.hosts.reference` does; its ``hello``
names the mutant. The hosts know no mutants: this is the selftest's entry around one.
"""

from __future__ import annotations

import sys

from palace_conformance.hosts import reference


def apply_mutant(argv: list[str]) -> None:
    """``--mutant NAME``: patch palace_bridge in this process; a bad name is one line, exit 1."""
    if "--mutant" not in argv:  # other arguments belong to whoever wraps this host
        return
    name = argv[argv.index("--mutant") + 1:][:1]
    from palace_conformance.selftest import mutants

    try:
        if not name:
            raise mutants.MutantError("--mutant needs a name")
        mutants.apply(mutants.find(name[0]))
    except mutants.MutantError as exc:
        sys.exit(f"{reference.IMPL}: {exc}")
    reference.VARIANT = f"mutant {name[0]}"


def main() -> None:
    apply_mutant(sys.argv[1:])
    reference.main()


if __name__ == "__main__":
    main()
