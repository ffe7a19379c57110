"""V8's code cache for the modules jiti evaluates (hosts/pi/lib/code-cache.mjs).

A load leaves the cached data of the bridge's modules under ``--cache-dir``/v8; the next host
uses it (V8 accepts it, so nothing is written again), and data V8 rejects is compiled afresh and
replaced. Whatever the cache holds, the bridge does the same. (The code jiti evaluates from its
transpile cache is not the text of a first, fresh transpile, so each test loads once before and
starts from the code cache of the next load.)
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from palace_conformance.hosts import node
from palace_conformance.runner.execution.driver import DriverClient

from .support import EXTENSIONS, clean_env

WHEREAMI = f"pi-extension:{EXTENSIONS / 'whereami.ts'}"
DEADLINE_MS = 60000


def _load_and_ask(cache: Path, root: Path) -> dict[str, str]:
    """A host whose jiti caches live in ``cache``: hello, load, the whereami tool, exit."""
    argv = node.host_command(WHEREAMI)
    argv[argv.index("--cache-dir") + 1] = str(cache)
    root.mkdir(parents=True)
    env = clean_env(root / "home")
    client = DriverClient(argv, env=env, cwd=root, stderr_path=root / "host-stderr.txt")
    with client.start():
        assert client.hello(DEADLINE_MS)["protocol"] == 1
        assert client.request("load", {"env": env}, deadline_ms=DEADLINE_MS).ok
        reply = client.request("call_tool", {"name": "whereami", "args": {}},
                               deadline_ms=DEADLINE_MS)
        assert reply.ok, reply.error
        assert client.request("exit", {}, deadline_ms=DEADLINE_MS).ok
    answer: dict[str, str] = json.loads(reply.result["content"][0]["text"])
    return {key: value for key, value in answer.items() if key != "mark"}


def _entries(cache: Path) -> dict[str, tuple[int, bytes]]:
    return {p.name: (p.stat().st_ino, p.read_bytes()) for p in (cache / "v8").glob("*.v8")}


def test_a_load_keeps_the_code_cache_and_the_next_host_uses_it(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    _load_and_ask(cache, tmp_path / "transpiled")
    shutil.rmtree(cache / "v8")  # what a first load from jiti's transpile cache keeps
    first = _load_and_ask(cache, tmp_path / "first")
    kept = _entries(cache)
    assert kept, "the first load kept no code cache"
    assert all(len(data) > 0 for _, data in kept.values())
    assert not list((cache / "v8").glob("*.tmp")), "a partial file was left behind"
    second = _load_and_ask(cache, tmp_path / "second")
    assert _entries(cache) == kept, "data V8 accepted was written again"
    assert {k: v for k, v in second.items() if k not in ("cwdAtImport", "pwd")} == \
        {k: v for k, v in first.items() if k not in ("cwdAtImport", "pwd")}


def test_data_v8_rejects_is_compiled_afresh_and_replaced(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    _load_and_ask(cache, tmp_path / "transpiled")
    shutil.rmtree(cache / "v8")  # what a first load from jiti's transpile cache keeps
    first = _load_and_ask(cache, tmp_path / "first")
    garbage = b"not V8's cached data" * 8
    for entry in (cache / "v8").glob("*.v8"):
        entry.write_bytes(garbage)
    again = _load_and_ask(cache, tmp_path / "again")
    after = _entries(cache)
    assert after and all(data != garbage for _, data in after.values())
    assert again["whereami"] == first["whereami"] == "unset"


def test_a_full_cache_keeps_nothing_more(tmp_path: Path) -> None:
    source = (node.PI_DIR / "lib" / "code-cache.mjs").read_text(encoding="utf-8")
    match = re.search(r"export const MAX_CACHE_FILES = (\d+);", source)
    assert match is not None
    cache = tmp_path / "cache"
    _load_and_ask(cache, tmp_path / "transpiled")
    shutil.rmtree(cache / "v8")
    (cache / "v8").mkdir()
    for n in range(int(match[1])):
        (cache / "v8" / f"filler{n}").write_bytes(b"")
    _load_and_ask(cache, tmp_path / "full")
    assert not list((cache / "v8").glob("*.v8")), "a full cache kept more"
    (cache / "v8" / "filler0").unlink()
    _load_and_ask(cache, tmp_path / "room")
    assert len(list((cache / "v8").glob("*.v8"))) == 1, "room for one kept other than one"
