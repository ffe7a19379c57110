"""palace-conformance: fixtures, a fault-injecting fake MemPalace server and a runner."""

__version__ = "0.1.0"
