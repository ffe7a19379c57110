"""A fake MemPalace MCP server: one brain (``brain``), two transports (``stdio``, ``http``).

It answers like ``mempalace`` 3.11.0 until a fault plan tells it to misbehave, and writes every
message, process event and fired fault to a JSON-lines journal that fixtures assert on.
"""
