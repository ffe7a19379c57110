"""One run's private world: temp dir, HOME, shims on PATH and the fake ``mempalace`` package on
PYTHONPATH, journal, fault plan, palace state, the HTTP fake, a lock holder, and the bridge's
environment.

Every run (one scenario on one transport) gets its own, so runs can go in parallel and nothing a
bridge does leaks into the next run. :meth:`World.close` always cleans up: it stops the fake and
the lock holder and kills any fake child a bridge left behind.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import httpx

from palace_conformance import processes as procs
from palace_conformance.errors import PalaceError
from palace_conformance.fake.faults import FaultPlan, plan_from_json
from palace_conformance.fake.options import ENV_JOURNAL, ENV_PLAN, ENV_STATE, TOKEN_ENV
from palace_conformance.fake.shims import WORLD_FILE, install_shim, python_path, write_world
from palace_conformance.runner.execution import warm_client
from palace_conformance.runner.execution.warm_client import LAUNCH_ARGV
from palace_conformance.scenarios import paths, placeholders
from palace_conformance.scenarios.model import PLACEHOLDERS, FeedHelper, Palace, Scenario, Step
from palace_conformance.scenarios.palace_state import PalaceSeedError, write_state
from palace_conformance.scenarios.server_needs import FAKE_SERVER, ServerTraits
from palace_conformance.standins import scripted as standins

START_S = 15.0  # how long a fake or lock holder may take to come up
REAP_WAIT_S = 5.0  # how long a SIGKILLed stdio child may wait for its bridge to reap it
#: variables never inherited from the runner's own environment (they would steer the bridge)
SCRUBBED_PREFIXES = ("MEMPALACE_", "PALACE_")
REMOTE_URL = "MEMPALACE_REMOTE_URL"
REMOTE_TOKEN = "MEMPALACE_REMOTE_TOKEN"
SIGNALS = {"SIGTERM": signal.SIGTERM, "SIGKILL": signal.SIGKILL, "SIGINT": signal.SIGINT,
           "SIGHUP": signal.SIGHUP}


#: a run's temp directory names the runner that made it, so a later runner can tell a stale one
OWNER_FILE = ".pc-runner-pid"
TEMP_PREFIX = "pc-"
STALE_AFTER_S = 24 * 3600.0


def claim(directory: Path) -> None:
    """Mark ``directory`` (a temp dir of this runner) as this process's."""
    (directory / OWNER_FILE).write_text(f"{os.getpid()}\n", encoding="ascii")


def clean_stale(directory: str | os.PathLike[str] | None = None, *,
                older_than_s: float = STALE_AFTER_S) -> list[Path]:
    """Remove the ``pc-*`` temp dirs a runner killed with SIGKILL left behind: marked by
    :func:`claim`, the mark older than ``older_than_s``, its runner no longer alive. Anything
    else (unmarked, recent, a live runner's, unreadable) is left alone. Returns those removed."""
    base = Path(directory if directory is not None else tempfile.gettempdir())
    removed = []
    now = time.time()
    try:
        entries = list(base.iterdir())
    except OSError:
        return []
    for entry in entries:
        if not entry.name.startswith(TEMP_PREFIX):
            continue
        try:
            mark = entry / OWNER_FILE
            if entry.is_symlink() or now - mark.stat().st_mtime < older_than_s:
                continue
            pid = int(mark.read_text(encoding="ascii").strip())
        except (OSError, ValueError):
            continue
        if pid == os.getpid() or procs.alive(pid):
            continue
        remove_tree(entry)
        if not entry.exists():
            removed.append(entry)
    return removed


def tree_digest(directory: Path) -> dict[str, str]:
    """What each entry under ``directory`` is (a file's SHA-256, a link's target, a folder),
    keyed by its relative path; symlinks are not followed and ``__pycache__`` is left out
    (Python's own cache, written as the fake is imported). Plain strings, no ``Path``: the
    runner checks a run's ``bin/`` this way before each thing it starts (~8 times a run)."""
    out: dict[str, str] = {}
    root = os.fspath(directory)
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        here = os.path.relpath(folder, root)
        prefix = "" if here == os.curdir else here.replace(os.sep, "/") + "/"
        for name in sorted([*dirs, *files]):
            path = os.path.join(folder, name)
            key = prefix + name
            try:
                info = os.lstat(path)
                if stat.S_ISLNK(info.st_mode):
                    out[key] = "link:" + os.readlink(path)
                elif stat.S_ISDIR(info.st_mode):
                    out[key] = "dir"
                elif stat.S_ISREG(info.st_mode):
                    with open(path, "rb") as handle:
                        out[key] = hashlib.sha256(handle.read()).hexdigest()
                else:
                    out[key] = f"special:{stat.S_IFMT(info.st_mode)}"
            except OSError as exc:
                out[key] = f"unreadable:{exc.errno}"
    return out


def remove_tree(directory: Path) -> None:
    """``shutil.rmtree``, after giving back the write bit :meth:`World.seal` took from folders."""
    for folder, dirs, _ in os.walk(directory):
        for name in dirs:
            with contextlib.suppress(OSError):
                path = Path(folder, name)
                if not path.is_symlink():
                    path.chmod(path.stat().st_mode | stat.S_IWUSR)
    shutil.rmtree(directory, ignore_errors=True)


class SetupError(PalaceError):
    """A prerequisite of the run could not be set up: the scenario is not testable; one line."""


def _expanded(data: Any, values: Mapping[str, str]) -> Any:
    """``data`` with ``${NAME}`` replaced; names without a value stay as written (a
    ``${FAKE_URL}`` on a stdio run sits only in steps and checks that never run there)."""
    full = {name: values.get(name, "${" + name + "}") for name in PLACEHOLDERS}
    try:
        return placeholders.expand(data, full)
    except placeholders.PlaceholderError as exc:
        raise SetupError(str(exc)) from None


def expand_scenario(scenario: Scenario, values: Mapping[str, str]) -> Scenario:
    """The scenario with ``${NAME}`` replaced, built once every value is known."""
    return Scenario.from_json(_expanded(dict(scenario.raw), values), scenario.path)


@dataclass(frozen=True)
class StartParts:
    """What a world lays out before its palace starts, which reads it as it starts: the fault
    plan, the palace's contents, the feed helper. The palace's URL exists only once it listens,
    so these parts alone are expanded with the values known before (``${TMP}``, the token), and
    the scenario as a whole is expanded once, after the palace listens (:meth:`World.open`)."""

    faults: FaultPlan
    palace: Palace
    feed_helper: FeedHelper

    @classmethod
    def of(cls, scenario: Scenario, values: Mapping[str, str]) -> StartParts:
        raw = scenario.raw
        data = _expanded({"faults": list(raw.get("faults", [])), "palace": raw.get("palace"),
                          "feed": (raw.get("helpers") or {}).get("feed")}, values)
        return cls(faults=plan_from_json(data["faults"], source=f"scenario {scenario.id}"),
                   palace=Palace.from_json(data["palace"]),
                   feed_helper=FeedHelper.from_json(data["feed"]))


def _journal_record(raw: bytes) -> dict[str, Any] | None:
    """One journal line as its record; None for a torn or foreign line."""
    try:
        record = json.loads(raw)
    except json.JSONDecodeError:
        return None
    return record if isinstance(record, dict) else None


def scrubbed_environ() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(SCRUBBED_PREFIXES)}


class World:
    """Create with :meth:`open`; the expanded scenario is :attr:`scenario`."""

    def __init__(self, scenario: Scenario, transport: str, *,
                 work_root: str | os.PathLike[str] | None = None, keep: bool = False,
                 warm_start: bool = True) -> None:
        self.original = scenario
        #: the full server's program (profile ``servers``): ``server kill`` aims at its children
        self.full_server: str | None = None
        self.warm_start = warm_start  # fork the HTTP fake from the warm server (warm_client)
        self.scenario = scenario
        self.transport = transport
        self.keep = keep
        # the id names the directory: anything but a plain name character is replaced (a
        # loaded scenario's id has the schema's form; this one may have been built elsewhere)
        slug = f"{TEMP_PREFIX}{re.sub(r'[^A-Za-z0-9._-]', '-', scenario.id[:40])}-{transport}-"
        if work_root is not None:
            Path(work_root).mkdir(parents=True, exist_ok=True)
        self.root = Path(tempfile.mkdtemp(prefix=slug, dir=work_root)).resolve()
        claim(self.root)
        self.home = self.root / "home"
        self.bin = self.root / "bin"
        self.journal = self.root / "journal.jsonl"
        self.plan = self.root / "faults.json"
        self.state = self.root / "palace-state.json"
        self.fake_stderr = self.root / "fake-stderr.txt"
        self.host_stderr = self.root / "host-stderr.txt"
        self.fake: subprocess.Popen[bytes] | warm_client.WarmProcess | None = None
        self.fake_url: str | None = None
        self.holder: subprocess.Popen[bytes] | None = None
        self.env: dict[str, str] = {}
        self.values: dict[str, str] = {}
        self._http: httpx.Client | None = None
        self.sealed: dict[str, str] | None = None  # bin/'s digest once sealed (seal)
        #: what the palace server changed in this run's bounds, for the report (the fake: none)
        self.server_notes: list[str] = []

    # -- setup ---------------------------------------------------------------------------------

    def open(self) -> World:
        """Build everything; :class:`SetupError` when a prerequisite fails."""
        self.home.mkdir(parents=True)
        self.values = {"TMP": str(self.root)}
        token = self.original.http.token
        if self.transport == "http" and token is not None:
            self.values["FAKE_TOKEN"] = token
        early = StartParts.of(self.original, self.values)  # ${FAKE_URL} comes with the fake
        self.journal.touch()
        self._lay_out(early)
        if early.palace.unrunnable is not None:
            self._install_unrunnable(early.palace.unrunnable)
        if early.palace.installed:  # else nothing that starts a palace is put in reach
            self._install_palace()
            self._install_standins(early)
        if self.transport == "http":
            self._start_server()
            assert self.fake_url is not None
            self.values["FAKE_URL"] = self.fake_url
        self.scenario = expand_scenario(self.original, self.values)
        self.env = self._bridge_env()
        if self.scenario.palace.lock_held:
            self._hold_lock()
        return self

    # the steps a world with another palace (real/world.py) does its own way

    def _lay_out(self, early: StartParts) -> None:
        """The fault plan and the palace's contents written, the paths confined."""
        self.plan.write_text(json.dumps(early.faults.for_transport(self.transport).to_json()))
        try:
            write_state(early.palace, self.state)
        except PalaceSeedError as exc:
            raise SetupError(f"cannot seed the palace: {exc}") from None
        self._confine(early)

    def _install_unrunnable(self, how: str) -> None:
        """``palace.unrunnable``: ``bin/mempalace-mcp`` an executable regular file that exec
        refuses (a ``#!`` naming no interpreter: ENOENT; no ``#!`` and no binary: ENOEXEC), so
        only the start fails, after any lookup (STDIO-10)."""
        self.bin.mkdir(parents=True, exist_ok=True)
        server = self.bin / "mempalace-mcp"
        if how == "missing-interpreter":
            server.write_text(f"#!{self.root / 'no-such-interpreter'}\n", encoding="utf-8")
        else:
            server.write_text("palace-conformance: not a program (no #! line, no binary)\n",
                              encoding="utf-8")
        server.chmod(0o755)

    def _install_palace(self) -> None:
        """What the bridge starts as its palace (``mempalace-mcp`` ...) put on its PATH. The run's
        settings ride in the shim directory too: a bridge that filters its child's environment
        (the official TS SDK's default) still reaches this run's fake."""
        install_shim(self.bin, python_package=True, settings=self._fake_settings())

    def _start_server(self) -> None:
        """The HTTP palace started; sets :attr:`fake_url`."""
        self._start_http_fake()

    def _install_standins(self, early: StartParts) -> None:
        """The runner's stand-ins for the feed helper and the CLI, over the shims."""
        feed = early.feed_helper
        standins.install(self.bin, {"journal": str(self.journal), "root": str(self.root),
                                    "feed": feed.to_config()})

    def _confine(self, early: StartParts) -> None:
        """The path policy again, at run time (the loader checked the fixture as written): the
        fake's own variables are not the fixture's to set, and every file the feed helper will
        write, resolved now, stays inside this run's directory."""
        try:
            paths.check_fixture(self.original.raw)
            feed = early.feed_helper
            if feed.mine_source is not None:
                source = paths.confine(self.root, feed.mine_source, "helpers.feed.mine_source")
                for name in feed.files:
                    paths.confine(source, name, "helpers.feed.files name")
                    paths.confine(self.root, source / name, "helpers.feed.files name")
        except paths.PathEscape as exc:
            raise SetupError(f"refused by the path policy: {exc}") from None

    def _base_env(self) -> dict[str, str]:
        env = scrubbed_environ()
        env["HOME"] = str(self.home)
        env["PATH"] = f"{self.bin}{os.pathsep}{os.environ.get('PATH', os.defpath)}"
        return env

    def _fake_settings(self) -> dict[str, str]:
        """The fake's own variables for this run: its journal, fault plan and palace state."""
        return {ENV_JOURNAL: str(self.journal), ENV_PLAN: str(self.plan),
                ENV_STATE: str(self.state)}

    def add_fake_settings(self, settings: dict[str, str]) -> None:
        """More of the fake's variables for this run (a profile's ``PALACE_FAKE_FAULTS_FOR``),
        before :meth:`seal`: in the bridge's environment, and in the shim directory's world file
        beside the others, so a bridge that filters its children's environment still gives
        them to the fake."""
        self.env.update(settings)
        if (self.bin / WORLD_FILE).is_file():
            write_world(self.bin, {**self._fake_settings(), **settings})

    def fake_env(self) -> dict[str, str]:
        """The environment of a fake process the runner starts itself."""
        env = self._base_env()
        env.update(self._fake_settings())
        palace = self.original.env.get("MEMPALACE_PALACE_PATH")
        if palace:
            env["MEMPALACE_PALACE_PATH"] = palace
        return env

    def _bridge_env(self) -> dict[str, str]:
        """The fake's environment, plus the fake ``mempalace`` package first on PYTHONPATH; for
        ``palace.installed: false`` neither the shims nor the package (the runner's own PATH
        and PYTHONPATH stay); then the scenario's ``env``."""
        env = self.fake_env()
        env.pop("MEMPALACE_PALACE_PATH", None)
        if self.scenario.palace.installed:
            inherited = os.environ.get("PYTHONPATH")
            env["PYTHONPATH"] = os.pathsep.join([str(python_path(self.bin)),
                                                 *([inherited] if inherited else [])])
        else:
            env["PATH"] = os.environ.get("PATH", os.defpath)
        return self._with_remote_and_scenario_env(env)

    def _with_remote_and_scenario_env(self, env: dict[str, str]) -> dict[str, str]:
        """``env`` plus the palace's URL and token over HTTP, then the scenario's own ``env``
        (a ``null`` value unsets): the last layers of every world's bridge environment."""
        if self.transport == "http" and self.fake_url:
            env[REMOTE_URL] = self.fake_url
            if self.scenario.http.token is not None:
                env[REMOTE_TOKEN] = self.scenario.http.token
        for key, value in self.scenario.env.items():
            if value is None:
                env.pop(key, None)
            else:
                env[key] = value
        return env

    def _start_http_fake(self) -> None:
        ready = self.root / "fake-ready.json"
        argv = [*LAUNCH_ARGV, "fake", "http", "--port", "0", "--ready-file",
                str(ready), "--plan", str(self.plan), "--journal", str(self.journal), "--state",
                str(self.state)]
        if self.original.http.sessions:
            argv.append("--sessions")
        env = self.fake_env()
        env["PALACE_FAKE_WATCH_PID"] = str(os.getpid())  # the fake exits if this runner dies
        if self.original.http.token is not None:
            env[TOKEN_ENV] = self.original.http.token  # not in argv: argv is a wire-secret probe
        with open(self.fake_stderr, "wb") as err:
            self.fake = warm_client.start(argv, warm=self.warm_start, env=env, cwd=self.root,
                                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
        deadline = time.monotonic() + START_S
        while not ready.exists():
            if self.fake.poll() is not None or time.monotonic() > deadline:
                why = (f"exited {self.fake.returncode}" if self.fake.poll() is not None
                       else f"not ready after {START_S:.0f} s")
                raise SetupError(f"the HTTP fake did not start ({why}): {self._fake_tail()}")
            time.sleep(0.01)
        info = json.loads(ready.read_text())
        self.fake_url = f"http://127.0.0.1:{info['port']}/mcp"

    def _fake_tail(self) -> str:
        try:
            lines = self.fake_stderr.read_text(errors="replace").splitlines()
        except OSError:
            return "no stderr"
        return " | ".join(line for line in lines[-3:] if line.strip()) or "no stderr"

    def _hold_lock(self) -> None:
        argv = [*LAUNCH_ARGV, "fake", "hold-lock"]
        palace = self.env.get("MEMPALACE_PALACE_PATH")
        if palace:
            argv += ["--palace", palace]
        self.holder = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, env=self._base_env(),
                                       cwd=self.root, start_new_session=True)
        assert self.holder.stdout is not None
        line = self.holder.stdout.readline()  # "holding <path> as PID n", or EOF on failure
        if not line.startswith(b"holding"):
            err = self.holder.stderr.read().decode(errors="replace") if self.holder.stderr else ""
            raise SetupError(f"cannot hold the palace lock: {err.strip() or 'holder exited'}")

    def seal(self) -> None:
        """Make the run's ``bin/`` (the fake's shims, the runner's stand-ins and their
        configuration, first on PATH) read-only and remember its digest, once everything the
        runner puts there is in place: :meth:`tampered` compares against it before the runner
        starts anything and before it judges."""
        if not self.bin.is_dir():
            self.sealed = {}
            return
        for folder, dirs, files in os.walk(self.bin, topdown=False):
            for name in [*files, *dirs]:
                path = Path(folder, name)
                with contextlib.suppress(OSError):
                    if not path.is_symlink():
                        path.chmod(path.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP
                                                           | stat.S_IWOTH))
        with contextlib.suppress(OSError):
            self.bin.chmod(0o555)
        self.sealed = tree_digest(self.bin)

    def tampered(self) -> str | None:
        """Why the sealed ``bin/`` can no longer be trusted (None while it is as sealed): the
        entries changed, added or removed since :meth:`seal`. One line."""
        if self.sealed is None:
            return None
        now = tree_digest(self.bin) if self.bin.is_dir() else {}
        changed = sorted(k for k in set(now) | set(self.sealed) if now.get(k) != self.sealed.get(k))
        if not changed:
            return None
        shown = ", ".join(changed[:3]) + (f" and {len(changed) - 3} more" if len(changed) > 3
                                           else "")
        return (f"the run's shims or stand-ins in bin/ were changed during the run ({shown}): "
                "nothing more is started from them (a fixture or profile file aimed at the "
                "runner's own files?)")

    # -- during the run ------------------------------------------------------------------------

    def journal_mark(self) -> int:
        """The journal's size in bytes: records before this mark were written earlier."""
        try:
            return self.journal.stat().st_size
        except OSError:
            return 0

    def read_journal(self) -> tuple[list[dict[str, Any]], list[int]]:
        """Every complete record and the byte offset where each starts."""
        try:
            data = self.journal.read_bytes()
        except OSError:
            return [], []
        records, offsets = [], []
        position = 0
        for raw in data.split(b"\n"):
            start = position
            position += len(raw) + 1
            record = _journal_record(raw) if raw.strip() else None
            if record is not None:
                records.append(record)
                offsets.append(start)
        return records, offsets

    def journal_since(self, offset: int) -> list[dict[str, Any]]:
        """The complete records written at or after byte ``offset`` (a :meth:`journal_mark`)."""
        try:
            with open(self.journal, "rb") as handle:
                handle.seek(offset)
                data = handle.read()
        except OSError:
            return []
        # the part after the last newline is still being written
        return [record for raw in data.split(b"\n")[:-1]
                if (record := _journal_record(raw)) is not None]

    def live_stdio_child(self) -> int | None:
        """The newest stdio fake child (from the journal) that is still running; of the full
        server's program when a profile names one (``full_server``)."""
        records, _ = self.read_journal()
        exited = {r.get("pid") for r in records if r.get("kind") == "process_exit"}
        for record in reversed(records):
            argv = record.get("argv")
            if self.full_server is not None and not (
                    isinstance(argv, list) and argv
                    and str(argv[0]).rsplit("/", 1)[-1] == self.full_server):
                continue
            if record.get("kind") == "process_start" and record.get("transport") == "stdio":
                pid = record.get("pid")
                if isinstance(pid, int) and pid not in exited and procs.alive(pid):
                    return pid
        return None

    def server_action(self, step: Step) -> tuple[bool, Any, dict[str, Any] | None]:
        """A ``server`` step: ``(ok, result, error)``."""
        action = step.params.get("action")
        if action == "kill":
            return self._kill(str(step.params.get("signal", "SIGKILL")))
        if action == "kill_lock_holder":
            return self.kill_lock_holder()
        if self.transport != "http" or self.fake_url is None:
            return False, None, {"kind": "bad_request",
                                 "message": f"server action {action!r} needs the HTTP fake"}
        if action == "arm":
            return self._control("POST", "faults", list(step.params.get("faults") or []))
        if action == "clear_faults":
            return self._control("DELETE", "faults", None)
        if action == "forget_sessions":
            return self._control("POST", "sessions/forget", None)
        if action == "rotate_token":
            return self._control("POST", "token", {"token": step.params.get("token")})
        return False, None, {"kind": "bad_request", "message": f"unknown server action {action!r}"}

    def kill_lock_holder(self) -> tuple[bool, Any, dict[str, Any] | None]:
        """SIGKILL the ``palace.lock.held`` holder: the kernel drops its flock (FAKE-06)."""
        holder = self.holder
        if holder is None:
            return False, None, {"kind": "bad_request", "message": "no lock holder to kill: the "
                                 "scenario does not set palace.lock.held"}
        if holder.poll() is not None:
            return False, None, {"kind": "bad_request", "message": f"the lock holder (PID "
                                 f"{holder.pid}) already exited with {holder.returncode}"}
        holder.kill()
        try:
            holder.wait(START_S)  # the lock is free once the process is gone
        except subprocess.TimeoutExpired:
            return False, None, {"kind": "timeout", "message": f"the lock holder (PID "
                                 f"{holder.pid}) outlived SIGKILL for {START_S:.0f} s"}
        return True, {"pid": holder.pid}, None

    def _kill(self, name: str) -> tuple[bool, Any, dict[str, Any] | None]:
        signum = SIGNALS.get(name, signal.SIGKILL)
        if self.transport == "http":
            if self.fake is None or self.fake.poll() is not None:
                return False, None, {"kind": "bad_request", "message": "the HTTP fake is not up"}
            self.fake.send_signal(signum)
            return True, {"pid": self.fake.pid, "signal": name}, None
        pid = self.live_stdio_child()
        if pid is None:
            return False, None, {"kind": "bad_request", "message": "no live stdio child to kill"}
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            return False, None, {"kind": "bad_request", "message": f"pid {pid} is already gone"}
        if signum == signal.SIGKILL:
            # the next step starts once the bridge has reaped its child (and so run its exit
            # handlers), not when the signal was sent: a fixed sleep after a kill measures the
            # machine's load, not the bridge (a bridge that never reaps is judged by the steps)
            procs.wait_reaped(pid, REAP_WAIT_S)
        return True, {"pid": pid, "signal": name}, None

    def _control(self, method: str, path: str,
                 body: Any) -> tuple[bool, Any, dict[str, Any] | None]:
        assert self.fake_url is not None
        if self._http is None:
            # plain HTTP to loopback: no TLS, so no CA bundle to load (~40 ms of CPU each)
            self._http = httpx.Client(timeout=10, verify=False)
        base = self.fake_url.rsplit("/mcp", 1)[0]
        try:
            answer = self._http.request(method, f"{base}/_fake/{path}",
                                        content=None if body is None else json.dumps(body))
        except httpx.HTTPError as exc:
            return False, None, {"kind": "http_error", "message": f"control API: {exc}"}
        try:
            payload = answer.json()
        except ValueError:
            payload = answer.text
        if answer.status_code != 200:
            return False, payload, {"kind": "http_error", "message": f"control API answered "
                                    f"{answer.status_code}: {payload}",
                                    "data": {"status": answer.status_code}}
        return True, payload, None

    # -- teardown ------------------------------------------------------------------------------

    def journal_pids(self) -> list[int]:
        records, _ = self.read_journal()
        return [r["pid"] for r in records
                if r.get("kind") in ("process_start", "descendant_start")
                and isinstance(r.get("pid"), int)]

    def close(self) -> None:
        """Stop the fake and the lock holder, kill leftovers, remove the directory (unless kept)."""
        if self._http is not None:
            with contextlib.suppress(Exception):
                self._http.close()
        procs.stop(self.fake)
        procs.stop(self.holder, grace_s=1.0)
        if self.holder is not None:
            for stream in (self.holder.stdout, self.holder.stderr):
                if stream is not None:
                    with contextlib.suppress(OSError):
                        stream.close()
        killed = procs.kill_leftovers(self.journal_pids())
        procs.wait_gone(killed, 2.0)
        if not self.keep:
            for _ in range(3):  # a dying child may still write a last file into the tree
                remove_tree(self.root)
                if not self.root.exists():
                    break
                time.sleep(0.1)


class PalaceServer(Protocol):
    """The palace behind a run's bridge, handed to the run (``RunOptions.server``): what it can
    serve, the allowance its start adds to a ``load``'s deadline, and the world of one run."""

    @property
    def traits(self) -> ServerTraits: ...

    @property
    def start_allowance_ms(self) -> int: ...

    @property
    def stop_allowance_ms(self) -> int: ...

    @property
    def palace_start_ms(self) -> int: ...

    def world(self, scenario: Scenario, transport: str, *,
              work_root: str | os.PathLike[str] | None = None,
              warm_start: bool = True) -> World: ...


@dataclass(frozen=True)
class FakePalace:
    """The default palace: a fake of its own in every world (the real one is
    :class:`palace_conformance.real.world.RealServerSetup`)."""

    traits: ServerTraits = FAKE_SERVER
    start_allowance_ms: int = 0
    stop_allowance_ms: int = 0
    palace_start_ms: int = 0  # the fake's bounds never move

    def world(self, scenario: Scenario, transport: str, *,
              work_root: str | os.PathLike[str] | None = None,
              warm_start: bool = True) -> World:
        return World(scenario, transport, work_root=work_root, warm_start=warm_start)


FAKE_PALACE = FakePalace()
