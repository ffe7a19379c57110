"""The shim directory: what a bridge finds when it looks for an installed MemPalace.

``install_shim(DIR)`` writes ``DIR/mempalace-mcp``, ``DIR/mempalace-light-mcp`` (the fake with the
light server's catalogue), ``DIR/mempalace`` (the fake CLI) and ``DIR/mempalace-pi-session`` (a
stand-in for pi's transcript exporter): Python scripts, so a bridge that reads a launcher's
shebang finds a Python. Put ``DIR`` first on ``PATH`` and any bridge, in any language, talks to
the fake.

With ``python_package=True`` (the runner, ``palace-conformance fake install-shim``) ``DIR`` also
gets ``.palace``: a minimal virtual environment of this interpreter "with mempalace installed".
Its site-packages holds the fake ``mempalace`` package (a link to ``fake/pypackage/mempalace``)
and ``palace-conformance-kit.json`` (where the kit and ``DIR`` are), and the shims' shebang names
its Python. So a bridge that runs ``<shebang python> -m mempalace.mcp_server`` reaches the fake,
and so does ``python3 -m mempalace...`` with :func:`python_path` on ``PYTHONPATH`` (the runner
sets it). Without it, the shims' Python is this interpreter, which cannot import ``mempalace``:
a machine where only the launchers are installed.

With ``settings`` (the runner: a run's ``PALACE_FAKE_*`` journal, plan and state) ``DIR`` also
gets ``.palace-world.json``, and every shim and the package's entry points read it before they
start: each setting becomes the default of its variable. So a bridge that gives its child a
filtered environment (the official TypeScript SDK's ``StdioClientTransport`` passes only HOME,
LOGNAME, PATH, SHELL, TERM and USER) still starts the fake of its run; a variable the child
did inherit wins.

Standard library only, and few files: the runner installs a shim directory for every run. The
stand-ins import this module on every helper run (:func:`apply_world`), so what only installing
needs (``re``, ``shlex``, ``shutil``) is imported where it is used.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from collections.abc import Mapping
from pathlib import Path

from palace_conformance.bytecode import script_prelude

#: shim name -> (module, call) its script runs; ``argv`` is ``sys.argv``, as the process got it
SHIMS = {
    "mempalace-mcp": ("palace_conformance.fake.cli", "fake_mcp_main()"),
    "mempalace-light-mcp": ("palace_conformance.fake.cli", "fake_light_mcp_main()"),
    "mempalace": ("palace_conformance.fake.mempalace_cli", "mempalace_cli_main(argv[1:], argv[0])"),
    # a scriptable stand-in for the transcript exporter a bridge runs before mempalace_mine
    "mempalace-pi-session": ("palace_conformance.standins.feed_session", "shim_main()"),
}
SHIM_NAMES = tuple(SHIMS)
VENV_DIR = ".palace"  # the virtual environment "with mempalace installed", inside DIR
KIT_FILE = "palace-conformance-kit.json"  # beside the package: read by its entry points
PACKAGE_SOURCE = Path(__file__).resolve().parent / "pypackage" / "mempalace"
KIT_ROOT = Path(__file__).resolve().parent.parent.parent  # the directory holding palace_conformance


def shebang_limit() -> int:
    """The longest interpreter path this kernel reads from a ``#!`` line: 255 bytes of line on
    Linux since 5.1 and 511 on macOS, else distlib's conservative 127 (minus ``#!`` and ``\\n``).
    A longer path (or one with spaces) gets pip's ``/bin/sh`` trampoline instead."""
    if sys.platform == "darwin":
        return 509
    import re

    version = re.match(r"(\d+)\.(\d+)", os.uname().release)
    modern = (sys.platform.startswith("linux") and version is not None
              and (int(version[1]), int(version[2])) >= (5, 1))
    return 253 if modern else 125


def venv_python(directory: str | os.PathLike[str]) -> Path:
    """The Python of the shim directory's venv (it exists after ``python_package=True``)."""
    return Path(directory).absolute() / VENV_DIR / "bin" / "python"


def shim_python(directory: str | os.PathLike[str]) -> str:
    """The Python for scripts in the shim directory: its venv's, or else this interpreter."""
    python = venv_python(directory)
    return str(python) if python.exists() else sys.executable


def python_path(directory: str | os.PathLike[str]) -> Path:
    """The venv's site-packages, holding the fake ``mempalace`` package: what goes on
    ``PYTHONPATH``."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    return Path(directory).absolute() / VENV_DIR / "lib" / version / "site-packages"


def write_script(path: Path, python: str, comment: str, body: str, flags: str = "") -> None:
    """An executable Python script for ``python`` (``flags``: one interpreter option, e.g.
    ``-S``): a plain shebang when the path fits in one, else the ``/bin/sh`` trampoline pip uses
    for long paths or paths with spaces."""
    import shlex

    options = f" {flags}" if flags else ""
    if len(python.encode()) <= shebang_limit() and not any(c.isspace() for c in python):
        head = f"#!{python}{options}\n"
    else:
        head = f"#!/bin/sh\n'''exec' {shlex.quote(python)}{options} \"$0\" \"$@\"\n' '''\n"
    path.write_text(f"{head}# {comment}\n{body}", encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def _replace_link(link: Path, target: str | os.PathLike[str]) -> None:
    import shutil

    if link.is_symlink() or link.is_file():
        link.unlink()
    elif link.is_dir():
        shutil.rmtree(link)
    link.symlink_to(target)


def _install_package(directory: Path, preset: str | None = None) -> Path:
    """A minimal venv under ``directory`` (what ``venv --without-pip`` makes, less the extras:
    a linked interpreter and pyvenv.cfg) with the fake package linked into its site-packages."""
    base = Path(getattr(sys, "_base_executable", "") or sys.executable).absolute()
    home = directory / VENV_DIR
    (home / "bin").mkdir(parents=True, exist_ok=True)
    (home / "pyvenv.cfg").write_text(
        f"home = {base.parent}\ninclude-system-site-packages = false\n"
        f"version = {'.'.join(map(str, sys.version_info[:3]))}\n", encoding="utf-8")
    for name in ("python", "python3"):
        _replace_link(home / "bin" / name, base)
    site = python_path(directory)
    site.mkdir(parents=True, exist_ok=True)
    _replace_link(site / "mempalace", PACKAGE_SOURCE)
    kit = {"kit_root": str(KIT_ROOT), "shim_dir": str(directory)}
    if preset:
        kit["preset"] = preset
    (site / KIT_FILE).write_text(json.dumps(kit), encoding="utf-8")
    return site


#: the shims that serve MCP: a preset baked into the directory applies to them
SERVER_SHIMS = frozenset({"mempalace-mcp", "mempalace-light-mcp"})
#: the shims a baked preset reaches: the servers (its faults) and the stand-ins (its standins)
PRESET_SHIMS = SERVER_SHIMS | {"mempalace-pi-session"}
PRESET_ENV = "PALACE_FAKE_PRESET"  # fake.options.ENV_PRESET; not imported: keep this module light
#: the run's settings (``{"palace_conformance_world": 1, "env": {NAME: VALUE}}``) in the shim
#: directory: the defaults every shim and the package's entry points apply (see the docstring)
WORLD_FILE = ".palace-world.json"
WORLD_MARK = "palace_conformance_world"


def apply_world(directory: str | os.PathLike[str] | None) -> None:
    """Make the settings in ``directory``'s world file the defaults of their variables (the
    environment still wins); nothing when there is none or it is unreadable."""
    if not directory:
        return
    try:
        with open(os.path.join(directory, WORLD_FILE), encoding="utf-8") as handle:
            world = json.load(handle)
    except (OSError, ValueError):
        return
    settings = world.get("env") if isinstance(world, dict) else None
    for name, value in (settings.items() if isinstance(settings, dict) else ()):
        if isinstance(name, str) and isinstance(value, str):
            os.environ.setdefault(name, value)


def _world_prelude(target: Path) -> str:
    """The lines a shim runs first: :func:`apply_world` inline (the shim imports nothing of the
    kit before it, and a ``-S`` interpreter has only the standard library)."""
    return (f"import json as _json, os as _os\n\ntry:\n"
            f"    with open({str(target / WORLD_FILE)!r}, encoding='utf-8') as _handle:\n"
            f"        for _name, _value in dict(_json.load(_handle).get('env') or {{}}).items():\n"
            f"            _os.environ.setdefault(str(_name), str(_value))\n"
            f"except (OSError, ValueError, AttributeError, TypeError):\n    pass\n\n")


def write_world(directory: str | os.PathLike[str], settings: Mapping[str, str]) -> Path:
    """Write the run's settings into ``directory``'s world file; returns its path."""
    path = Path(directory).absolute() / WORLD_FILE
    path.write_text(json.dumps({WORLD_MARK: 1, "env": dict(settings)}), encoding="utf-8")
    return path


def install_shim(directory: str | os.PathLike[str], python_package: bool = False,
                 preset: str | None = None,
                 settings: Mapping[str, str] | None = None) -> list[Path]:
    """Write the shims into ``directory`` (with ``python_package``, the venv with the fake
    ``mempalace`` package too, named in their shebangs); returns the shims.

    ``preset`` (a name from ``fake-presets.json``, checked by the caller) is baked into the
    server shims, the ``mempalace-pi-session`` stand-in and the package's kit file as the default
    of ``PALACE_FAKE_PRESET``, so a harness whose only change is ``PATH`` meets the fault; the
    environment still wins.

    ``settings`` (variable -> value) are written into the world file, the defaults every shim
    and the package's entry points apply, so they reach a child whose environment was filtered."""
    target = Path(directory).absolute()
    created = not target.exists()
    target.mkdir(parents=True, exist_ok=True)
    if python_package:
        _install_package(target, preset)
        python, flags = str(venv_python(target)), ""
    else:  # no site import: faster spawns, and nothing there could hold mempalace anyway
        python, flags = sys.executable, "-S"
    written = []
    for name, (module, call) in SHIMS.items():
        path = target / name
        function = call.split("(", 1)[0]
        default = (f"import os\n\nos.environ.setdefault({PRESET_ENV!r}, {preset!r})\n"
                   if preset and name in PRESET_SHIMS else "")
        write_script(path, python, f"palace-conformance shim: the fake MemPalace posing as {name}",
                     f"{script_prelude()}{_world_prelude(target)}{default}import sys\n\n"
                     f"sys.path[:0] = [{str(KIT_ROOT)!r}]\n"
                     f"from {module} import {function}\n\nargv = sys.argv\n{call}\n", flags)
        written.append(path)
    placed = [p.name for p in written] + ([VENV_DIR] if python_package else [])
    if settings is not None:
        write_world(target, settings)
        placed.append(WORLD_FILE)
    previous = _read_manifest(target)
    if previous is not None:  # installing again: the directory is as much ours as it was
        created = bool(previous.get("created_dir"))
    (target / MANIFEST).write_text(json.dumps({"placed": placed, "created_dir": created}),
                                   encoding="utf-8")
    return written


#: what ``install_shim`` placed in the directory, so ``uninstall_shim`` removes exactly that
MANIFEST = ".palace-shim.json"


def _read_manifest(target: Path) -> dict[str, object] | None:
    try:
        data = json.loads((target / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _ours(path: Path) -> bool:
    """A file this module wrote: a shim script (its marker line) or the venv (its kit file)."""
    if path.name == VENV_DIR:
        return path.is_dir() and not path.is_symlink() and (path / "pyvenv.cfg").is_file()
    if path.name == WORLD_FILE:
        try:
            world = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False
        return isinstance(world, dict) and WORLD_MARK in world and not path.is_symlink()
    try:
        head = path.read_bytes()[:4096].decode("utf-8", "replace")
    except OSError:
        return False
    return path.is_file() and not path.is_symlink() and \
        f"# palace-conformance shim: the fake MemPalace posing as {path.name}\n" in head


def uninstall_shim(directory: str | os.PathLike[str]) -> tuple[list[Path], list[Path]]:
    """Remove what :func:`install_shim` placed in ``directory`` and nothing else: the shims it
    wrote (recognised by their marker line; one changed since is kept), the venv, the manifest,
    and the directory itself when install created it and it is empty now. Returns (removed,
    kept); :class:`FileNotFoundError` when no shim was installed there."""
    import shutil

    target = Path(directory).absolute()
    manifest = _read_manifest(target)
    if manifest is None:
        raise FileNotFoundError(f"no shim installed in {target} (no {MANIFEST})")
    placed = manifest.get("placed")
    removed: list[Path] = []
    kept: list[Path] = []
    for name in placed if isinstance(placed, list) else []:
        path = target / str(name)
        if "/" in str(name) or not (path.exists() or path.is_symlink()):
            continue
        if not _ours(path):
            kept.append(path)
            continue
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink()
        removed.append(path)
    (target / MANIFEST).unlink()
    if manifest.get("created_dir") and not any(target.iterdir()):
        target.rmdir()
        removed.append(target)
    return removed, kept
