"""palace-conformance: fixtures, a fault-injecting fake MemPalace server and a runner."""

from palace_conformance.bytecode import redirect as _redirect_bytecode

_redirect_bytecode()  # first: every later import of the kit reads its cached bytecode

__version__ = "0.1.0"
