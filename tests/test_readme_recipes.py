"""The "Reproduce a palace fault locally" recipes (docs/fake.md; the README's until the README
began with testing a bridge), run as written (with a temp HOME), so they cannot rot: every fenced
block of that section is one bash script."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "docs" / "fake.md"
SECTION = "## Reproduce a palace fault locally"
BIN = Path(sys.executable).parent


def recipe_blocks() -> list[str]:
    text = README.read_text(encoding="utf-8")
    start = text.index(SECTION)
    end = text.index("\n## ", start + len(SECTION))
    return re.findall(r"```sh\n(.*?)```", text[start:end], flags=re.S)


def test_the_section_has_both_recipes() -> None:
    blocks = recipe_blocks()
    assert len(blocks) == 2
    assert "--preset stalled-search" in blocks[0] and "forget_session" in blocks[1]


@pytest.mark.parametrize("index", [0, 1], ids=["stalled-search", "session-expiry"])
def test_a_recipe_runs_as_written(tmp_path: Path, index: int) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PALACE_", "MEMPALACE_"))}
    env.update(HOME=str(tmp_path), PATH=f"{BIN}{os.pathsep}{env.get('PATH', os.defpath)}")
    # a recipe that fails half-way must not leave its background fake behind
    cleanup = "trap 'kill $(jobs -p) 2>/dev/null || true' EXIT"
    script = f"{cleanup}\nset -euo pipefail\n{recipe_blocks()[index]}"
    done = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=90)
    assert done.returncode == 0, done.stderr
    if index == 0:
        assert "timed out" in done.stderr  # the stand-in harness froze on its search
        assert "!! fault stall fired on mempalace_search" in done.stdout
    else:
        assert "armed ctl-1-forget_session" in done.stdout
        assert "!! fault forget_session fired on mempalace_status" in done.stdout
        assert "1 fault(s) fired" in done.stdout
