"""Relays between a bridge and a palace that hand every JSON-RPC message they pass to a callback:
:mod:`.stdio` (a child process's pipes) and :mod:`.http` (a loopback reverse proxy). ``record``
turns what they see into a draft scenario; ``real`` journals the real server through them like
the fake journals itself."""
