"""A host wrapper that leaves a daemon behind: it starts a sleeper that inherits its stdin,
stdout and stderr, then becomes the reference host (``exec``), as a shell wrapper that starts a
helper daemon does.

Usage: ``python daemon_host.py MODE PIDFILE`` where MODE is ``plain`` (the sleeper stays in the
host's process group), ``setsid`` (the sleeper detaches into a session of its own) or ``daemon``
(it detaches and lets go of the host's stdio too, its streams on ``/dev/null``, as a real daemon
does); the sleeper's pid is appended to PIDFILE, one a line.
"""

from __future__ import annotations

import os
import subprocess
import sys

SLEEP_S = 600  # far past every deadline of a run: only a kill ends it in time


def main() -> None:
    mode, pid_file = sys.argv[1], sys.argv[2]
    detached = subprocess.DEVNULL if mode == "daemon" else None
    sleeper = subprocess.Popen([sys.executable, "-c", f"import time; time.sleep({SLEEP_S})"],
                               start_new_session=mode in ("setsid", "daemon"), stdin=detached,
                               stdout=detached, stderr=detached)
    with open(pid_file, "a", encoding="ascii") as handle:
        handle.write(f"{sleeper.pid}\n")
    os.execv(sys.executable, [sys.executable, "-m", "palace_conformance.hosts.reference"])


if __name__ == "__main__":
    main()
