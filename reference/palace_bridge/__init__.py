"""palace_bridge: the reference Python copy of the MemPalace bridge (pi's ``mempalace.ts``).

Policy (timeouts, backoff, budgets, retry decisions) is plain code over events and a clock; the
transports (a stdio child, a remote HTTP palace) are thin. See ``config`` for every knob.
"""

__version__ = "0.1.0"
