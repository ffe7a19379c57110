"""A run's world with the real mempalace behind the bridge (``run --server real``): the fake's
:class:`~palace_conformance.runner.execution.world.World` with its palace steps done another way
(same directory layout, journal and clean-up), built by :meth:`RealServerSetup.world`, the palace
a run is handed.

* stdio: ``mempalace-mcp`` on the bridge's PATH is the fault relay (``relay/fault_stdio.py``)
  to the real ``mempalace-mcp``, with the scenario's fault plan;
* HTTP: the fault relay process (``relay/fault_http.py``) that starts the real streamable-HTTP
  server on an ephemeral loopback port and stands in front of it; the bridge is given its URL;
* the palace: a copy of a template HOME whose palace is initialised (the fake's default state),
  or a fresh one for ``palace.state: fresh``; seeds are filed through real tool calls;
* every real server gets the isolated environment and the suite's embedding stub.

:func:`real_server_setup` prepares what a whole run shares: the located server, the embedding
stub and the template.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from palace_conformance.bytecode import script_prelude
from palace_conformance.fake.shims import write_script
from palace_conformance.loopback import free_port
from palace_conformance.real import embedding, install, seeding, start_time
from palace_conformance.real.traits import REAL_SERVER
from palace_conformance.relay.fault_stdio import CONFIG_NAME, START_RECORD
from palace_conformance.relay.zygote import CONFIG_KEY
from palace_conformance.runner.execution.world import (
    SetupError,
    StartParts,
    World,
)
from palace_conformance.scenarios.model import Scenario
from palace_conformance.scenarios.server_needs import ServerTraits

#: how long the pre-started real server may take to import its dependencies (3-5 s; far more
#: on a loaded machine); past it every spawn starts the real server cold
ZYGOTE_READY_S = 120.0
HTTP_READY_S = 60.0  # the real HTTP server's cold start: 1.6-2.7 s, far more on a loaded machine
TOKEN_VARIABLE = "MEMPALACE_MCP_HTTP_TOKEN"
INIT_BUDGET = "MEMPALACE_MCP_INIT_TIMEOUT_MS"  # the bridge's budget for its child's start
LARGEST_BUDGET = 2**31 - 1  # a budget this large means "as long as it takes": left alone
KIT_ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class RealServerSetup:
    """What every real world of one run shares."""

    server: install.RealServer
    embedding_url: str
    template_home: Path  # a HOME whose palace is initialised and empty
    traits: ServerTraits = REAL_SERVER
    #: added to the runner's own deadline for a ``load``/``reload`` that sets none: a stdio
    #: bridge that starts its palace eagerly waits out the real server's cold start (1-5 s,
    #: over 15 s with two cold starts at once on a loaded machine); a step's ``timeout_ms``,
    #: the scenario's bound, is never widened
    start_allowance_ms: int = 30000
    #: added to the upper bound of a stdio ``shutdown``/``reload`` step: the real server exits
    #: 1-2 s after stdin EOF (3.5-5.5 s at load average 37-41, 2026-12-06), past the bridge's
    #: 2 s grace, so its stop takes the grace plus the SIGTERM that follows (1.5 s at load 28);
    #: the fake exits at once. Its own slack, so the scenario's bound stays the scenario's
    stop_allowance_ms: int = 3500
    #: the socket of the run's pre-started real server (``relay/zygote.py``), or None
    zygote: str | None = None
    #: the real server's start as measured at the run's beginning (``real/start_time.py``):
    #: added to the upper bounds that include a palace start; None: not measured (0)
    palace_start: start_time.StartTracker | None = None

    @property
    def palace_start_ms(self) -> int:
        return self.palace_start.ms if self.palace_start is not None else 0

    def world(self, scenario: Scenario, transport: str, *,
              work_root: str | os.PathLike[str] | None = None,
              warm_start: bool = True) -> RealWorld:
        """A world of this run with the real server behind the bridge."""
        return RealWorld(self, scenario, transport, work_root=work_root, warm_start=warm_start)

    def server_env(self, home: Path, palace: Path,
                   extra: dict[str, str] | None = None) -> dict[str, str]:
        return install.isolated_environment(
            home, palace, {**embedding.environment(self.embedding_url), **(extra or {})})


@contextlib.contextmanager
def real_server_setup(real_python: str | None) -> Iterator[RealServerSetup]:
    """Locate the real server (:class:`~palace_conformance.real.install.RealServerMissing`
    when there is none), serve the embedding stub and build the template for the duration."""
    server = install.locate(real_python)
    with embedding.running_stub() as url, tempfile.TemporaryDirectory(prefix="pc-real-") as tmp:
        template = Path(tmp) / "home"
        template.mkdir()
        setup = RealServerSetup(server=server, embedding_url=url, template_home=template)
        env = setup.server_env(template, seeding.palace_of(template))
        with zygote_started(server, env, Path(tmp) / "zygote.sock") as path:
            setup = dataclasses.replace(setup, zygote=path)
            try:
                seeding.initialise(server, env)
            except seeding.SeedError as exc:
                raise install.RealServerMissing(
                    f"the real server could not initialise a palace ({exc}); check "
                    f"{server.python} runs mempalace") from None
            yield dataclasses.replace(setup, palace_start=start_time.StartTracker(
                start_time.measure(server, env, path)))


@contextlib.contextmanager
def zygote_started(server: install.RealServer, env: dict[str, str],
                   path: Path) -> Iterator[str | None]:
    """The run's pre-started real server (``relay/zygote.py``): its socket's path while it
    runs, or None when it did not start (every spawn then starts the real server cold)."""
    argv = [str(server.python), "-c",
            f"import sys; sys.path[:0] = [{str(KIT_ROOT)!r}]; "
            "from palace_conformance.relay import zygote; "
            "sys.path[:] = [p for p in sys.path[1:] if p]; "  # neither the kit nor the cwd
            "zygote.serve(sys.argv[1])", str(path)]
    try:
        proc = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, start_new_session=True)
    except OSError:
        yield None
        return
    assert proc.stdout is not None and proc.stdin is not None
    ready = _ready_line(proc, ZYGOTE_READY_S)
    try:
        yield str(path) if ready else None
    finally:
        with contextlib.suppress(OSError):
            proc.stdin.close()  # the zygote ends, and kills the servers it still has
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _ready_line(proc: subprocess.Popen[bytes], budget_s: float) -> bool:
    """Whether ``proc`` printed ``ready`` within the budget (its imports, on a loaded machine)."""
    stdout = proc.stdout
    assert stdout is not None
    found: list[bytes] = []
    reader = threading.Thread(target=lambda: found.append(stdout.readline()), daemon=True)
    reader.start()
    reader.join(budget_s)
    return bool(found) and found[0].strip() == b"ready"


def widened_init_budget(env: Mapping[str, str], scenario: Scenario, transport: str,
                        start_ms: int) -> str | None:
    """The bridge's stdio init budget is a bound that includes a palace start (its child's, to
    the ``initialize`` answer): a budget the scenario sets gets the real server's measured
    start, unless a ``delay`` fault of the scenario is timed against it (a delay past the
    budget must still run past it), or it means "no budget" (0) or is the largest there is.
    The widened value, or None when it stays."""
    value = env.get(INIT_BUDGET, "")
    delays = any(f.action == "delay" for f in scenario.faults.for_transport(transport).faults)
    if (transport != "stdio" or start_ms <= 0 or not value.isascii() or not value.isdigit()
            or scenario.env.get(INIT_BUDGET) != value or delays
            or not 0 < int(value) <= LARGEST_BUDGET - start_ms):
        return None
    return str(int(value) + start_ms)


class RealWorld(World):
    """:class:`World` with the real server; create with ``RealWorld(setup, scenario, ...)``."""

    def __init__(self, setup: RealServerSetup, scenario: Scenario, transport: str, *,
                 work_root: str | os.PathLike[str] | None = None, keep: bool = False,
                 warm_start: bool = True) -> None:
        super().__init__(scenario, transport, work_root=work_root, keep=keep,
                         warm_start=warm_start)
        self.setup = setup
        self.palace = seeding.palace_of(self.home)
        if setup.palace_start is not None:
            self.server_notes.append(
                f"bounds that include a palace start (a step or journal gap during which a "
                f"child started) get {setup.palace_start.describe()}")

    def close(self) -> None:
        """The world's end; first its relays' ``server_start`` waits go to the run's figure."""
        if self.setup.palace_start is not None:
            self.setup.palace_start.observe(self._start_waits())
        super().close()

    def _start_waits(self) -> list[int]:
        try:
            text = self.journal.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return []
        waits = []
        for line in text.splitlines():
            if START_RECORD not in line:
                continue
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if (isinstance(record, dict) and record.get("kind") == START_RECORD
                    and isinstance(record.get("ms"), int)):
                waits.append(int(record["ms"]))
        return waits

    def _lay_out(self, early: StartParts) -> None:
        self.plan.write_text(json.dumps(early.faults.for_transport(self.transport).to_json()))
        self._confine(early)
        self._palace(early)

    def _install_palace(self) -> None:
        self._install_relay()

    def _start_server(self) -> None:
        self._start_http_server()

    def _palace(self, early: StartParts) -> None:
        """An initialised palace (a copy of the template) unless the scenario wants it fresh,
        then its seeds, filed by a real server."""
        palace = early.palace
        if not palace.fresh:
            seeding.copy_home(self.setup.template_home, self.home)
        if palace.diary or palace.drawers or palace.events:
            env = self.setup.server_env(self.home, self.palace)
            try:
                seeding.seed(self.setup.server, env, palace.diary, palace.drawers,
                             palace.events)
            except seeding.SeedError as exc:
                raise SetupError(f"cannot seed the real palace: {exc}") from None

    def _install_relay(self) -> None:
        self.bin.mkdir(parents=True, exist_ok=True)
        config = self.bin / CONFIG_NAME
        config.write_text(json.dumps({
            "journal": str(self.journal), "palace": str(self.palace), "plan": str(self.plan),
            "command": self.setup.server.stdio_command(), CONFIG_KEY: self.setup.zygote,
            "env": {k: v for k, v in self.setup.server_env(self.home, self.palace).items()
                    if k.startswith(("MEMPALACE_", "HF_", "TRANSFORMERS_", "ANONYMIZED_"))},
        }), encoding="utf-8")
        write_script(self.bin / "mempalace-mcp", sys.executable,
                     "palace-conformance: a fault relay to the real mempalace-mcp",
                     f"{script_prelude()}import sys\n\nsys.path[:0] = [{str(KIT_ROOT)!r}]\n"
                     # the real server first (standard library only), the relay's imports after
                     "from palace_conformance.relay.zygote import spawn_early\n\n"
                     f"early = spawn_early({str(config)!r})\n"
                     "from palace_conformance.relay.fault_stdio import main\n\n"
                     f"main({str(config)!r}, early)\n")

    def _bridge_env(self) -> dict[str, str]:
        env = self._base_env()
        if not self.scenario.palace.installed:  # nothing that starts a palace is in reach
            env["PATH"] = os.environ.get("PATH", os.defpath)
        return self._with_start_in_init_budget(self._with_remote_and_scenario_env(env))

    def _with_start_in_init_budget(self, env: dict[str, str]) -> dict[str, str]:
        """The bridge's env with its stdio init budget widened (:func:`widened_init_budget`)."""
        widened = widened_init_budget(env, self.scenario, self.transport,
                                      self.setup.palace_start_ms)
        if widened is not None:
            self.server_notes.append(f"{INIT_BUDGET} {env[INIT_BUDGET]} -> {widened} ms: the "
                                     "bridge's init budget includes its child's start")
            env[INIT_BUDGET] = widened
        return env

    def _hold_lock(self) -> None:
        """The fake's holder on the real server's lock file: the real palace path, named."""
        named = "MEMPALACE_PALACE_PATH" in self.env
        self.env.setdefault("MEMPALACE_PALACE_PATH", str(self.palace))
        try:
            super()._hold_lock()
        finally:
            if not named:
                self.env.pop("MEMPALACE_PALACE_PATH", None)

    def _start_http_server(self) -> None:
        """The HTTP fault relay, which starts the real server as its child; its URL."""
        port = free_port()
        token = self.original.http.token
        env = self.setup.server_env(self.home, self.palace,
                                    {TOKEN_VARIABLE: token} if token is not None else None)
        ready = self.root / "relay-ready.json"
        config = self.root / "fault-relay-http.json"
        config.write_text(json.dumps({
            "journal": str(self.journal), "palace": str(self.palace), "plan": str(self.plan),
            "command": self.setup.server.http_command(port, self.palace), "port": port,
            "env": env, "token": token, "sessions": self.original.http.sessions,
            "ready": str(ready), CONFIG_KEY: self.setup.zygote}), encoding="utf-8")
        config.chmod(0o600)  # it holds the token
        argv = [sys.executable, "-c", f"import sys; sys.path[:0] = [{str(KIT_ROOT)!r}]; "
                "from palace_conformance.relay.fault_http import main; "
                f"main({str(config)!r})"]
        relay_env = {**env, "PALACE_FAKE_WATCH_PID": str(os.getpid())}
        with open(self.fake_stderr, "wb") as err:
            self.fake = subprocess.Popen(argv, env=relay_env, cwd=self.root,
                                         stdin=subprocess.DEVNULL, stdout=err, stderr=err,
                                         start_new_session=True)
        deadline = time.monotonic() + HTTP_READY_S
        while not ready.exists():
            if self.fake.poll() is not None:
                raise SetupError(f"the real HTTP server's relay exited {self.fake.returncode}: "
                                 f"{self._fake_tail()}")
            if time.monotonic() > deadline:
                raise SetupError(f"the real HTTP server was not ready after "
                                 f"{HTTP_READY_S:.0f} s: {self._fake_tail()}")
            time.sleep(0.02)
        self.fake_url = str(json.loads(ready.read_text(encoding="utf-8"))["url"])
