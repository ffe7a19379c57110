"""The palace-conformance fake posing as the ``mempalace`` package (3.11.0).

A bridge may start its palace without the ``mempalace-mcp`` console script: ``python -m
mempalace.mcp_server``, ``python -m mempalace mine DIR``, ``python -m mempalace.mcp_light_server``,
or a probe such as ``python -c "import mempalace"``. Each must land on the fake, never on nothing
(or on a real palace). ``palace-conformance fake install-shim DIR`` installs a copy of this package
into a small virtual environment under ``DIR`` (the Python in its shims' shebangs), and the runner
puts that copy first on the bridge's ``PYTHONPATH``.

The modules and entry points are the real ones (``mempalace.cli:main``,
``mempalace.mcp_proxy:main``, ``mempalace.mcp_server``, ``mempalace.mcp_light_server:main``);
importing the package loads nothing else, only running an entry point loads the fake.
"""

__version__ = "3.11.0"
