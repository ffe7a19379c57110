"""The bridge's stderr: stream or host callable, debug gating, and the token never shown."""

from __future__ import annotations

import io

from palace_bridge.log import REDACTED, Log


def test_lines_go_to_a_stream_or_a_host_callable():
    stream = io.StringIO()
    Log(stream).line("mempalace-mcp unavailable after retries; continuing without palace tools")
    assert stream.getvalue() == ("mempalace-mcp unavailable after retries; "
                                 "continuing without palace tools\n")
    lines: list[str] = []
    log = Log(lines.append, debug=True)
    log.line("one")
    log.raw("child line 1\nchild line 2\n")
    assert lines == ["one", "child line 1", "child line 2"]


def test_debug_and_child_stderr_only_in_debug_mode():
    quiet, loud = io.StringIO(), io.StringIO()
    for stream, debug in ((quiet, False), (loud, True)):
        log = Log(stream, debug=debug)
        log.debug("detail")
        log.raw("child says hi\n")
    assert quiet.getvalue() == ""
    assert loud.getvalue() == "mempalace[debug]: detail\nchild says hi\n"


def test_secrets_are_redacted_everywhere():
    stream = io.StringIO()
    log = Log(stream, debug=True, secrets=("s3cr3t",))
    log.line("token s3cr3t leaked?")
    log.debug("Authorization: Bearer s3cr3t")
    log.raw("child echoes s3cr3t\n")
    assert "s3cr3t" not in stream.getvalue()
    assert stream.getvalue().count(REDACTED) == 3


def test_a_broken_sink_never_raises():
    class Broken(io.StringIO):
        def write(self, text):
            raise OSError("EPIPE")

    Log(Broken()).line("still fine")


def test_a_closed_sink_never_raises():
    """A host that closed its stderr (ValueError on write) must not break the bridge either."""
    closed = io.StringIO()
    closed.close()
    Log(closed, debug=True).raw("child line\n")


def test_the_bridge_imports_no_mcp_sdk():
    """Runtime dependencies stay minimal: httpx only, never the ``mcp`` SDK."""
    import subprocess
    import sys

    code = ("import sys, palace_bridge.client, palace_bridge.remote, palace_bridge.local, "
            "palace_bridge.cli; print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('mcp', 'mcp_types', 'httpx2', 'pydantic')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    assert out.strip() == "[]"
