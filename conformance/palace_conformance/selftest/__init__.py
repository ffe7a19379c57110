"""The mutation self-test: mutants of the reference bridge (:mod:`.mutants`, one module per
behaviour area), the engine that runs each against the scenarios that should kill it
(:mod:`.engine`) and its command (:mod:`.command`). The only package besides the reference host
that imports the bridge, and only inside the host process."""
