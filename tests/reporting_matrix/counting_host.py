"""The reference host, counting its starts: ``python counting_host.py FILE`` appends one line to
FILE, then serves the driver protocol as the reference host does (how a test proves that a
bridge was not run a second time)."""

from __future__ import annotations

import os
import sys

from palace_conformance.hosts import reference

if __name__ == "__main__":
    with open(sys.argv[1], "a", encoding="utf-8") as starts:
        starts.write(f"{os.getpid()}\n")
    reference.main()
