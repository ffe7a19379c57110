"""Stand-ins for the helper programs a bridge runs besides the palace (e.g. mempalace-pi-session).

Each is scriptable by environment variables, always records how it was called, and is installed
next to the fake server by ``palace-conformance fake install-shim``.
"""
