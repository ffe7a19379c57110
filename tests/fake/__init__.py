"""Tests of the fake MemPalace server (stdio and HTTP transports)."""
