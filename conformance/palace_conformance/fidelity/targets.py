"""The two servers a fidelity run compares, and the world each session runs in.

A *target* says how to start its stdio server, its HTTP server and its ``mempalace`` CLI; a
*world* is one session's own HOME, palace and mine source under a temporary root, so no two
sessions (and no two targets) share a writer lock or a palace. Both targets get the same
environment: the isolated one of :mod:`palace_conformance.real.install`, the offline embedding
stub, and the fake's state file (which the real server ignores).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from palace_conformance.fake.options import ENV_STATE
from palace_conformance.fake.shims import install_shim
from palace_conformance.real.embedding import environment as embedding_environment
from palace_conformance.real.install import RealServer, isolated_environment

#: what the mine source holds: one small file, so a mine has something to file
SOURCE_FILE = "notes.md"
SOURCE_TEXT = "# Fidelity notes\n\nThe palace remembers what the probe wrote.\n"
SOURCE_MTIME = 1764979200.0  # 2025-12-06 00:00 UTC


@dataclass(frozen=True)
class World:
    """One session's directories; their paths are masked by the ``world-paths`` rule."""

    root: Path

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def palace(self) -> Path:
        return self.root / "palace"

    @property
    def source(self) -> Path:
        return self.root / "source"

    @property
    def state(self) -> Path:
        return self.root / "fake-state.json"

    def create(self) -> World:
        (self.home / ".config").mkdir(parents=True, exist_ok=True)
        self.source.mkdir(parents=True, exist_ok=True)
        (self.source / SOURCE_FILE).write_text(SOURCE_TEXT, encoding="utf-8")
        # one mtime in every world: a mined row carries it (``source_mtime``, the date it
        # infers), so both targets' rows agree without a rule
        os.utime(self.source / SOURCE_FILE, (SOURCE_MTIME, SOURCE_MTIME))
        # a new palace is fresh on both sides: the real server has no chroma database yet, and
        # the fake, without this, would start as an initialised empty palace (its default for
        # scenarios); "initialised" sessions get there through real writes on both
        self.state.write_text('{"initialised": false}\n', encoding="utf-8")
        return self


@dataclass(frozen=True)
class Target:
    """One server under comparison: its name, its commands and the directory its launchers
    live in (``bin_dir``, masked as ``<BIN>``, since the lock holder's text names it)."""

    name: str
    bin_dir: Path
    stdio: tuple[str, ...]
    cli: tuple[str, ...]
    http_prefix: tuple[str, ...]
    http_style: str  # "real": --transport http --palace P; "fake": fake http --no-control
    embedding_url: str
    #: how the HTTP server's argv[0:3] reads (a lock holder names it): masked as <HTTP_SERVER>
    http_argv: str = ""

    def stdio_command(self) -> list[str]:
        return list(self.stdio)

    def cli_command(self, *args: str) -> list[str]:
        return [*self.cli, *args]

    def http_command(self, port: int, world: World) -> list[str]:
        common = ["--host", "127.0.0.1", "--port", str(port)]
        if self.http_style == "real":
            return [*self.http_prefix, "--transport", "http", *common, "--palace",
                    str(world.palace)]
        return [*self.http_prefix, *common, "--no-control"]

    def environment(self, world: World, extra: dict[str, str] | None = None) -> dict[str, str]:
        env = isolated_environment(world.home, world.palace,
                                   embedding_environment(self.embedding_url))
        env[ENV_STATE] = str(world.state)
        env.update(extra or {})
        return env

    def placeholders(self, world: World) -> dict[str, str]:
        """The world's paths, longest first, as the ``world-paths`` rule masks them."""
        found = {"<SOURCE>": str(world.source), "<PALACE>": str(world.palace),
                 "<HOME>": str(world.home), "<BIN>": str(self.bin_dir),
                 "<WORLD>": str(world.root)}
        if self.http_argv:
            found["<HTTP_SERVER>"] = self.http_argv
        return found


def real_target(server: RealServer, embedding_url: str) -> Target:
    """The real mempalace: its ``mempalace-mcp``, ``mempalace`` and ``-m mempalace.mcp_server``."""
    # ``-m`` makes argv[0] the module's file, in the venv's site-packages
    mains = sorted(server.bin_dir.parent.glob(
        "lib/python*/site-packages/mempalace/mcp_server/__main__.py"))
    http_argv = f"{mains[0]} --transport http" if mains else ""
    return Target(name="real", bin_dir=server.bin_dir, stdio=tuple(server.stdio_command()),
                  cli=(str(server.bin_dir / "mempalace"),),
                  http_prefix=(str(server.python), "-m", "mempalace.mcp_server"),
                  http_style="real", embedding_url=embedding_url, http_argv=http_argv)


def fake_target(shim_dir: Path, embedding_url: str) -> Target:
    """The fake, reached the way a bridge reaches it: the shim directory's ``mempalace-mcp`` and
    ``mempalace``, and ``palace-conformance fake http``."""
    install_shim(shim_dir)
    kit = Path(sys.executable).parent / "palace-conformance"
    http = ((str(kit),) if kit.is_file()
            else (sys.executable, "-c", "from palace_conformance.cli import main; main()"))
    return Target(name="fake", bin_dir=shim_dir, stdio=(str(shim_dir / "mempalace-mcp"),),
                  cli=(str(shim_dir / "mempalace"),), http_prefix=(*http, "fake", "http"),
                  http_style="fake", embedding_url=embedding_url,
                  http_argv=f"{kit if kit.is_file() else '-c'} fake http")
