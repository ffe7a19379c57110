"""The mutation self-test: mutants of the reference bridge (:mod:`.mutants`, one module per
behaviour area) and the engine that runs each against the scenarios that should kill it
(:mod:`.engine`); its command is :mod:`palace_conformance.commands.selftest`. The only package
besides the reference host that imports the bridge, and only inside the host process."""
