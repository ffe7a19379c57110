"""A forked child ends with the exit status a fresh interpreter would give."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from palace_conformance.forked_child import exit_code

CHILD = textwrap.dedent("""
    import os, sys
    from palace_conformance.forked_child import run_as_main
    pid = os.fork()
    if pid == 0:
        os._exit(run_as_main(lambda: {body}))
    _, status = os.waitpid(pid, 0)
    sys.exit(os.waitstatus_to_exitcode(status))
""")


def test_exit_code_is_what_sys_exit_gives(capsys: pytest.CaptureFixture[str]) -> None:
    assert exit_code(None) == 0 and exit_code(3) == 3 and exit_code(257) == 1
    assert exit_code("bad plan") == 1
    assert capsys.readouterr().err == "bad plan\n"


@pytest.mark.parametrize(("body", "code", "err"), [
    ("None", 0, ""),
    ("sys.exit(4)", 4, ""),
    ("sys.exit('no palace')", 1, "no palace\n"),
    ("1 / 0", 1, "ZeroDivisionError"),
])
def test_a_forked_child_ends_as_python_would(body: str, code: int, err: str) -> None:
    done = subprocess.run([sys.executable, "-c", CHILD.format(body=body)], capture_output=True,
                          text=True, timeout=60, env={**os.environ})
    assert done.returncode == code
    assert err in done.stderr and (err or done.stderr == "")
