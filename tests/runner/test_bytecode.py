"""The bytecode cache redirect (palace_conformance/bytecode.py), in real interpreters: under
``PYTHONDONTWRITEBYTECODE`` the kit's processes compile into the kit's cache, never beside the
sources, and only when that cache's parent already exists; an explicit prefix or ``off`` wins."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import palace_conformance
from palace_conformance.bytecode import ENV, PYCACHE
from palace_conformance.cache_home import KIT_CACHE

KIT_PARENT = Path(palace_conformance.__file__).resolve().parent.parent
PROBE = ("import json, sys\nimport palace_conformance.json_pointer\n"
         "print(json.dumps([sys.pycache_prefix, sys.dont_write_bytecode]))")


def _probe(tmp_path: Path, code: str = PROBE, **env: str) -> tuple[str | None, bool]:
    """(sys.pycache_prefix, sys.dont_write_bytecode) in a fresh interpreter that imported the kit,
    with HOME and XDG_CACHE_HOME in tmp_path and only ``env`` besides."""
    base = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path / "home"),
            "XDG_CACHE_HOME": str(tmp_path / "cache"), "PYTHONPATH": str(KIT_PARENT)}
    out = subprocess.run([sys.executable, "-c", code], env={**base, **env}, cwd=tmp_path,
                         capture_output=True, text=True, timeout=60, check=True).stdout
    prefix, dont_write = json.loads(out.splitlines()[-1])
    return prefix, dont_write


def _cached(root: Path) -> list[str]:
    return sorted(p.name for p in root.rglob("*.pyc")) if root.exists() else []


def test_redirects_into_the_kit_cache_when_it_exists(tmp_path: Path) -> None:
    (tmp_path / "cache" / KIT_CACHE).mkdir(parents=True)
    prefix, dont_write = _probe(tmp_path, PYTHONDONTWRITEBYTECODE="1")
    target = tmp_path / "cache" / KIT_CACHE / PYCACHE
    assert prefix == str(target)
    assert dont_write is False
    names = _cached(target)  # what the probe imported after the package, compiled there
    assert any(name.startswith("json_pointer.") for name in names), names


def test_no_kit_cache_yet_leaves_python_alone(tmp_path: Path) -> None:
    prefix, dont_write = _probe(tmp_path, PYTHONDONTWRITEBYTECODE="1")
    assert (prefix, dont_write) == (None, True)
    assert not (tmp_path / "cache" / KIT_CACHE).exists()  # it creates no cache of its own


def test_off_and_an_explicit_prefix_win(tmp_path: Path) -> None:
    (tmp_path / "cache" / KIT_CACHE).mkdir(parents=True)
    assert _probe(tmp_path, PYTHONDONTWRITEBYTECODE="1", **{ENV: "off"}) == (None, True)
    mine = tmp_path / "mine"
    assert _probe(tmp_path, PYTHONDONTWRITEBYTECODE="1",
                  PYTHONPYCACHEPREFIX=str(mine)) == (str(mine), True)
    chosen = tmp_path / "chosen"
    assert _probe(tmp_path, PYTHONDONTWRITEBYTECODE="1", **{ENV: str(chosen)}) == (str(chosen),
                                                                                   False)
    assert any(name.startswith("json_pointer.") for name in _cached(chosen))


def test_writable_bytecode_is_not_redirected(tmp_path: Path) -> None:
    (tmp_path / "cache" / KIT_CACHE).mkdir(parents=True)
    assert _probe(tmp_path) == (None, False)
    assert _cached(tmp_path / "cache" / KIT_CACHE / PYCACHE) == []


def test_script_prelude_carries_the_redirect_to_a_shim(tmp_path: Path) -> None:
    """A shim written by a redirected process reads the same cache even when it runs under a
    HOME with no kit cache (a scenario's own HOME)."""
    (tmp_path / "cache" / KIT_CACHE).mkdir(parents=True)
    code = ("import palace_conformance.bytecode as b, sys\n"
            "sys.stdout.write(b.script_prelude())")
    out = subprocess.run([sys.executable, "-c", code],
                         env={"PATH": os.environ.get("PATH", ""), "PYTHONDONTWRITEBYTECODE": "1",
                              "XDG_CACHE_HOME": str(tmp_path / "cache"),
                              "PYTHONPATH": str(KIT_PARENT)},
                         capture_output=True, text=True, timeout=60, check=True).stdout
    target = tmp_path / "cache" / KIT_CACHE / PYCACHE
    assert repr(str(target)) in out
    elsewhere = tmp_path / "elsewhere"  # no kit cache here: only the prelude can redirect
    prefix, dont_write = _probe(elsewhere.parent, out + PROBE, PYTHONDONTWRITEBYTECODE="1",
                                XDG_CACHE_HOME=str(elsewhere))
    assert (prefix, dont_write) == (str(target), False)
    prefix, _ = _probe(tmp_path, PROBE, PYTHONDONTWRITEBYTECODE="1",
                       XDG_CACHE_HOME=str(elsewhere))
    assert prefix is None  # without the prelude, the same process is not redirected


def test_the_runners_stand_ins_read_the_kit_cache_under_a_scenarios_home(tmp_path: Path) -> None:
    """The runner's ``mempalace-pi-session`` and ``mempalace`` stand-ins (written over the fake's
    shims) carry the redirect too: run under a HOME with no kit cache, they compile into the
    writer's cache, so the next run reads it instead of compiling the kit's modules again."""
    (tmp_path / "cache" / KIT_CACHE).mkdir(parents=True)
    shims = tmp_path / "bin"
    code = ("import sys\nfrom pathlib import Path\n"
            "from palace_conformance.fake.shims import install_shim\n"
            "from palace_conformance.standins import scripted\n"
            "install_shim(sys.argv[1])\n"
            "scripted.install(Path(sys.argv[1]), {'journal': sys.argv[1] + '/journal.jsonl'})\n")
    subprocess.run([sys.executable, "-c", code, str(shims)],
                   env={"PATH": os.environ.get("PATH", ""), "PYTHONDONTWRITEBYTECODE": "1",
                        "XDG_CACHE_HOME": str(tmp_path / "cache"), "PYTHONPATH": str(KIT_PARENT)},
                   capture_output=True, text=True, timeout=60, check=True)
    cache = tmp_path / "cache" / KIT_CACHE / PYCACHE
    shutil.rmtree(cache)  # what the installer compiled: only the stand-in's run may refill it
    elsewhere = tmp_path / "scenario-home"  # a scenario's own HOME: no kit cache there
    elsewhere.mkdir()
    done = subprocess.run([str(shims / "mempalace-pi-session"), "--prepare"],
                          env={"PATH": os.environ.get("PATH", ""), "HOME": str(elsewhere),
                               "XDG_CACHE_HOME": str(elsewhere), "PYTHONDONTWRITEBYTECODE": "1"},
                          cwd=tmp_path, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert "scripted.cpython-" in " ".join(_cached(cache))
    assert _cached(elsewhere) == []
    assert (shims / "journal.jsonl").is_file()  # the stand-in ran, and journaled its run
